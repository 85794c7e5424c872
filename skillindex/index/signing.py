"""A skill's detached OpenSSF model signing signature (`skill.oms.sig`), verified for its folder.

`model_signing` (the `signing` extra) is imported only when a skill holds a signature and its
root names a verifier: an index of unsigned skills never loads it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skillindex import inputs
from skillindex.errors import ConfigError
from skillindex.model import Finding, Severity, SigningPolicy

SIGNATURE_FILE = "skill.oms.sig"
VERIFIED, FAILED, UNVERIFIED = "verified", "failed", "unverified"
MISSING, INVALID, UNPROVEN = "signature-missing", "signature-invalid", "signature-unverified"
MAX_SIGNATURE_BYTES = 1 << 20
# Folders the signature never covers, as the lock file's hash leaves them out.
_SKIPPED = (".git",)


@dataclass(frozen=True, slots=True)
class Signature:
    """What a skill's signature proved: verified (by `signer`), failed (`reason`), or not
    checked (unverified: no verifier for its root, or no `signing` extra)."""

    status: str
    signer: str | None
    digest: str  # sha256 of the signature file
    reason: str | None = None

    def to_json(self) -> str:
        return json.dumps({"status": self.status, "signer": self.signer, "digest": self.digest,
                           "reason": self.reason}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> Signature | None:
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(str(data["status"]), data.get("signer"), str(data["digest"]),
                       data.get("reason"))
        except (ValueError, KeyError, TypeError):
            return None


def signers(stored: Mapping[int, str | None]) -> dict[int, str]:
    """The signer of each candidate whose stored signature (JSON) was verified: a failed or
    unproven one names nobody, its finding says why."""
    found = {cid: Signature.from_json(text) for cid, text in stored.items()}
    return {cid: signature.signer for cid, signature in found.items()
            if signature is not None and signature.status == VERIFIED and signature.signer}


def examine(directory: str, files: Mapping[str, str | None],
            policy: SigningPolicy) -> Signature | None:
    """The signature of the skill in `directory`, whose files (relative path to the sha256 the
    scan read) are `files`; None when it holds no signature file."""
    if SIGNATURE_FILE not in files:
        return None
    path = Path(directory) / SIGNATURE_FILE
    try:
        data = inputs.read_bytes(path, max_bytes=MAX_SIGNATURE_BYTES, what="signature")
    except (ConfigError, OSError) as exc:
        return Signature(FAILED, None, "", f"the signature cannot be read: {_line(exc)}")
    digest = hashlib.sha256(data).hexdigest()
    bundle = _bundle(data)
    if bundle is None:
        return Signature(FAILED, None, digest, "the signature is not a model signing bundle")
    if policy.key is None and not policy.certificates:
        return Signature(UNVERIFIED, _certificate_subject(bundle), digest,
                         "no verifier for this root (signature_key or signature_certificates)")
    try:
        from model_signing import hashing, verifying  # noqa: PLC0415 - only for a signed skill
    except ImportError:
        return Signature(UNVERIFIED, None, digest,
                         "verifying needs the signing extra: pip install 'skillindex[signing]'")
    config = verifying.Config()  # type: ignore[no-untyped-call]
    if policy.key is not None:
        signer = _key_signer(policy.key)
        if signer is None:
            return Signature(FAILED, None, digest, f"the public key {policy.key} cannot be read")
        config.use_elliptic_key_verifier(public_key=policy.key)
    else:
        signer = _certificate_subject(bundle)
        config.use_certificate_verifier(certificate_chain=policy.certificates)
    serialization = _predicate(bundle).get("serialization", {})
    algorithm: Any = serialization.get("hash_type", "sha256") \
        if isinstance(serialization, dict) else "sha256"
    config.set_hashing_config(hashing.Config().use_file_serialization(  # type: ignore[no-untyped-call]
        hashing_algorithm=algorithm).set_ignored_paths(paths=[SIGNATURE_FILE, *_SKIPPED],
                                                       ignore_git_paths=False))
    problem = _uncovered(_predicate(bundle), files, algorithm)
    try:
        config.verify(Path(directory), path)
    except Exception as exc:  # the library's errors have no common base: any is a failure
        # The files the index read, named plainly, else the library's own words.
        return Signature(FAILED, signer, digest, problem or _line(exc))
    if problem is None and policy.key is None:
        problem = _expired(bundle)
    if problem is not None:
        return Signature(FAILED, signer, digest, problem)
    if policy.signers and signer not in policy.signers:
        return Signature(FAILED, signer, digest,
                         f"signed by {signer}, who is not among the root's signers")
    return Signature(VERIFIED, signer, digest)


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "…"


def _bundle(data: bytes) -> dict[str, Any] | None:
    try:
        bundle = inputs.load_json(data.decode("utf-8"), what="signature")
    except (UnicodeDecodeError, ConfigError):
        return None
    return bundle if isinstance(bundle, dict) else None


def _predicate(bundle: Mapping[str, Any]) -> dict[str, Any]:
    """The signed statement's predicate (its serialization and resources); {} when absent."""
    try:
        payload = base64.b64decode(bundle["dsseEnvelope"]["payload"])
        predicate = inputs.load_json(payload.decode("utf-8"), what="signature")["predicate"]
    except (KeyError, TypeError, ValueError, binascii.Error, ConfigError):
        return {}
    return predicate if isinstance(predicate, dict) else {}


def _uncovered(predicate: Mapping[str, Any], files: Mapping[str, str | None],
               algorithm: str) -> str | None:
    """Strictness beyond the library's check: every file the index holds of the skill (the
    ones it discloses) is named by the signature, with the digest the index read."""
    resources = predicate.get("resources")
    if not isinstance(resources, list):
        return "the signature lists no files"
    signed = {str(item.get("name")): item.get("digest") for item in resources
              if isinstance(item, dict)}
    present = {rel for rel in files if rel != SIGNATURE_FILE
               and not any(rel == top or rel.startswith(top + "/") for top in _SKIPPED)}
    extra = sorted(present - signed.keys())
    if extra:
        return f"files the signature does not cover: {', '.join(extra[:5])}"
    missing = sorted(signed.keys() - present)
    if missing:
        return f"files signed but missing: {', '.join(missing[:5])}"
    if algorithm == "sha256":
        changed = sorted(rel for rel in present
                         if files[rel] is not None and files[rel] != signed[rel])
        if changed:
            return f"files changed since they were read: {', '.join(changed[:5])}"
    return None


def _key_signer(key_path: str) -> str | None:
    """A public key's identity: the sha256 of its DER SubjectPublicKeyInfo."""
    try:
        from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    except ImportError:
        return None
    try:
        key = serialization.load_pem_public_key(
            inputs.read_bytes(Path(key_path), max_bytes=64 << 10, what="public key"))
        der = key.public_bytes(serialization.Encoding.DER,
                               serialization.PublicFormat.SubjectPublicKeyInfo)
    except (ValueError, TypeError, OSError, ConfigError):
        return None
    return "key:sha256:" + hashlib.sha256(der).hexdigest()


def _expired(bundle: Mapping[str, Any]) -> str | None:
    """Why a certificate of the bundle's chain is not valid now. The library checks the chain
    as of the signing certificate's start; without a trusted timestamp nothing shows that the
    signature was made before a certificate expired, so an expired one fails here."""
    from cryptography import x509  # noqa: PLC0415 - the library itself needs it

    now = datetime.now(UTC)
    for raw in _chain(bundle):
        try:
            certificate = x509.load_der_x509_certificate(base64.b64decode(raw))
        except (ValueError, binascii.Error):
            return "a certificate of the signature cannot be read"
        if certificate.not_valid_after_utc < now:
            return (f"the certificate {certificate.subject.rfc4514_string()} expired on "
                    f"{certificate.not_valid_after_utc:%Y-%m-%d}")
        if certificate.not_valid_before_utc > now:
            return (f"the certificate {certificate.subject.rfc4514_string()} is not valid "
                    "yet")
    return None


def _chain(bundle: Mapping[str, Any]) -> list[str]:
    """The base64 DER certificates of the bundle, the signing one first."""
    material = bundle.get("verificationMaterial")
    if not isinstance(material, dict):
        return []
    if isinstance(material.get("certificate"), dict):
        raw = material["certificate"].get("rawBytes")
        return [raw] if isinstance(raw, str) else []
    chain = material.get("x509CertificateChain")
    certificates = chain.get("certificates") if isinstance(chain, dict) else None
    if not isinstance(certificates, list):
        return []
    return [item["rawBytes"] for item in certificates
            if isinstance(item, dict) and isinstance(item.get("rawBytes"), str)]


def _certificate_subject(bundle: Mapping[str, Any]) -> str | None:
    """The subject of the bundle's signing certificate (RFC 4514), when it carries one."""
    material = bundle.get("verificationMaterial")
    if not isinstance(material, dict):
        return None
    raw = None
    if isinstance(material.get("certificate"), dict):
        raw = material["certificate"].get("rawBytes")
    elif isinstance(material.get("x509CertificateChain"), dict):
        chain = material["x509CertificateChain"].get("certificates")
        if isinstance(chain, list) and chain and isinstance(chain[0], dict):
            raw = chain[0].get("rawBytes")
    if not isinstance(raw, str):
        return None
    try:
        from cryptography import x509  # noqa: PLC0415 - comes with the signing extra
    except ImportError:
        return None
    try:
        certificate = x509.load_der_x509_certificate(base64.b64decode(raw))
    except (ValueError, binascii.Error):
        return None
    return "cert:" + certificate.subject.rfc4514_string()


def judged(signature: Signature | None, policy: SigningPolicy) -> Finding | None:
    """The finding a root's policy makes of a skill's signature: under `require` an unsigned
    or unproven skill is rejected (an error); under `record` a failed signature is a risk
    finding; a verified one, or an unverified one recorded, is no finding."""
    if signature is None:
        if not policy.require:
            return None
        return Finding(MISSING, Severity.ERROR,
                       f"unsigned: no {SIGNATURE_FILE}, and this root requires signatures")
    if signature.status == VERIFIED:
        return None
    if policy.require:
        code = INVALID if signature.status == FAILED else UNPROVEN
        return Finding(code, Severity.ERROR, f"{SIGNATURE_FILE}: {signature.reason}",
                       SIGNATURE_FILE)
    if signature.status == FAILED:
        return Finding(INVALID, Severity.WARNING, f"{SIGNATURE_FILE}: {signature.reason}",
                       SIGNATURE_FILE)
    return None

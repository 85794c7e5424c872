"""What every finding code means, in words an author reads beside the finding."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Code:
    """A finding code explained: a title of a few words and what to do about it."""

    title: str
    help: str


CODES: dict[str, Code] = {
    # SKILL.md and its frontmatter
    "frontmatter-missing": Code(
        "SKILL.md has no frontmatter",
        "SKILL.md must start with a line holding only `---`, then YAML fields (at least "
        "`name` and `description`), then another `---` line before the body."),
    "frontmatter-unclosed": Code(
        "The frontmatter is never closed",
        "Add a line holding only `---` after the last frontmatter field."),
    "yaml-invalid": Code(
        "The frontmatter is not valid YAML",
        "Fix the YAML: a value holding `: ` or starting with `[`, `{`, `*` or `&` must be "
        "quoted. Frontmatter over 64 KiB, nested deeper than 100 levels or holding more than "
        "1,000 values is refused too."),
    "yaml-not-mapping": Code(
        "The frontmatter is not a mapping",
        "The frontmatter must be `key: value` fields, not a list or a single value."),
    "yaml-repaired": Code(
        "The frontmatter was read line by line",
        "The YAML does not parse, and lenient hosts read each `key: value` line as text "
        "instead; strict ones reject the skill. Quote the values that hold `: ` or start "
        "with an indicator character."),
    "name-invalid": Code(
        "The name breaks the naming rules",
        "A name is 1 to 64 characters of lowercase letters, digits and single hyphens, not "
        "starting or ending with a hyphen. In every mode it must not be empty or hold `/`, "
        "control or invisible characters."),
    "name-reserved": Code(
        "The name holds a character skill:// URIs reserve",
        "In every mode a name must not hold `:`, `/`, `\\`, `%`, `?` or `#`, nor start with "
        "`.`: a URI joins a qualification to a name with `:` and a name to its files with "
        "`/`, so such a name could read as another skill's file. Rename the skill."),
    "name-too-long": Code(
        "The name is longer than 64 characters",
        "Shorten the name (and the folder, which must match it) to 64 characters at most."),
    "name-dir-mismatch": Code(
        "The name differs from its folder",
        "The `name` field must equal the name of the folder holding SKILL.md: rename one of "
        "them, or drop `name` (it then defaults to the folder's)."),
    "description-missing": Code(
        "No description",
        "Add a `description`: what the skill does and when to use it. Hosts show it to the "
        "model to decide when to load the skill, and most require it."),
    "description-too-long": Code(
        "The description is longer than 1,024 characters",
        "Shorten the description to 1,024 characters; move the detail into the body, which "
        "is read only once the skill is chosen."),
    "compatibility-too-long": Code(
        "The compatibility field is longer than 500 characters",
        "Shorten `compatibility` to 500 characters."),
    "field-type": Code(
        "A field has the wrong type",
        "`name`, `description`, `license`, `compatibility` and `allowed-tools` are strings, "
        "`enabled` is true or false, `metadata` maps strings to strings."),
    "unknown-field": Code(
        "A frontmatter field the specification does not define",
        "The field is kept as metadata; hosts that do not know it ignore it. Move it under "
        "`metadata` if it is yours."),
    "control-character": Code(
        "A field holds control characters",
        "Remove control characters from the frontmatter: NUL cannot be stored and rejects "
        "the skill, others are kept but shown escaped."),
    "entry-symlink": Code(
        "SKILL.md is a symbolic link",
        "SKILL.md must be a regular file inside the skill's folder."),
    "not-utf8": Code(
        "SKILL.md is not UTF-8",
        "Save SKILL.md as UTF-8 text."),
    "unreadable": Code(
        "A file or folder could not be read",
        "Check its permissions; what cannot be read is left out of the skill."),
    "file-too-large": Code(
        "A file is over the size limit",
        "SKILL.md is refused over 1 MiB (its frontmatter over 64 KiB); any other file over "
        "16 MiB is listed by its size and stat (a rewrite of it is still a change) but never "
        "read or handed to a model."),
    "number-too-large": Code(
        "A number too long to read",
        "A number written with more than 100 characters (a huge integer key or value, a long "
        "hex or base-60 number) is refused in both modes; quote it to keep it as text."),
    "skill-too-large": Code(
        "The skill is over the size limits",
        "A skill holds at most 512 files and 16 MiB in all (the MCP skills extension's "
        "limits); a larger one is rejected unread. Move large assets out of the skill."),
    # The walk inside a skill and above it
    "special-file": Code(
        "A file that is not a regular file",
        "FIFOs, sockets and devices are never opened; remove them from the skill."),
    "symlink-escape": Code(
        "A symbolic link leads outside the skill",
        "A link whose target is outside the skill's folder is left out; copy the file in "
        "instead."),
    "symlink-loop": Code(
        "A symbolic link leads back into its own folder",
        "The link is not followed; remove it."),
    "too-many-files": Code(
        "A folder nested too deep",
        "Folders deeper than 16 levels inside a skill are left out."),
    "hard-link": Code(
        "A file with more than one hard link",
        "The other name may be a file outside the skill, so it is not handed to a model "
        "unless the root allows hard links. Copy the file instead of linking it."),
    "name-not-utf8": Code(
        "A file or folder name that is not UTF-8",
        "Rename it: names that are not UTF-8 cannot be stored or named in a skill:// URI."),
    "plugins-unreadable": Code(
        "The list of installed Claude plugins could not be read",
        "The plugins' skill folders are not indexed until installed_plugins.json can be read "
        "as JSON."),
    "root-missing": Code(
        "A configured root that does not exist",
        "A `[[roots]]` path or a custom directory names a folder that is not there, so it "
        "holds no skills; create it, or fix or remove the setting."),
    "remote-stale": Code(
        "A URL root could not be brought up to date",
        "Its publisher's index or an artifact could not be fetched, did not match its digest "
        "or was an unsafe archive; the last verified copy stays indexed. `skillindex roots` "
        "says since when and why; fix the server or the entry, then reindex."),
    "sidecar-invalid": Code(
        "Codex's agents/openai.yaml cannot be read",
        "The file is not a YAML mapping (or its policy is not one), so its "
        "allow_implicit_invocation is not applied; fix the YAML."),
    "not-a-directory": Code(
        "A root that is not a folder",
        "A root must be a folder holding skill folders."),
    # Risk rules
    "hidden-unicode": Code(
        "Hidden Unicode characters",
        "Tag characters, bidirectional controls outside right-to-left text and zero-width "
        "characters inside words can hide instructions from a reader; remove them."),
    "prompt-injection": Code(
        "An instruction to the model to drop its rules",
        "Text telling the model to ignore prior instructions, hide what it does from the "
        "user or reveal its system prompt; quote the phrase if the skill talks about it."),
    "remote-exec": Code(
        "A download piped into an interpreter",
        "Running what a download returns (`curl … | sh`) executes code nobody reviewed; ship "
        "the script in scripts/ or pin and check what is downloaded."),
    "secret": Code(
        "A secret in a file",
        "A private key or a cloud, forge or API token; remove it and revoke it. The value is "
        "never shown, only its kind and place."),
    "binary-masquerade": Code(
        "A file whose bytes contradict its extension",
        "A text extension over binary bytes, or an image or archive extension over other "
        "bytes; rename the file or replace it."),
    "executable-outside-scripts": Code(
        "An executable outside scripts/",
        "Executable files (by mode or native binaries) belong in scripts/, where hosts and "
        "reviewers look for them."),
    "load-time-exec": Code(
        "A command a host runs when it loads the skill",
        "Claude Code runs every !`command` and every ```! block of SKILL.md while it loads the "
        "skill and puts their output in the text, before the model or the user reads it; "
        "move the command to scripts/ and tell the model when to run it."),
    # Signatures (skill.oms.sig)
    "signature-invalid": Code(
        "The skill's signature does not verify",
        "skill.oms.sig does not prove these files: a file changed, was added or removed "
        "after signing, the signer is not the root's verifier or not among its signers, or "
        "the certificate is expired or untrusted. Sign the skill again, or find out who "
        "changed it."),
    "signature-missing": Code(
        "The skill is unsigned where signatures are required",
        "The root says signatures = \"require\": add a skill.oms.sig made with the "
        "`model_signing` tool by a key or certificate the root trusts."),
    "signature-unverified": Code(
        "The skill's signature could not be checked",
        "The root requires signatures but names no verifier (signature_key or "
        "signature_certificates), or the signing extra is not installed."),
    # A set of skills checked together
    "name-collision": Code(
        "Two skills of the set have one name",
        "Hosts load one of them and hide the other (or reject both): give each skill a name "
        "of its own."),
    "uri-collision": Code(
        "Two skills' files have one skill:// URI",
        "A warning the reindex records when a plugin's skill (`kit:pdf`) sits beside a skill "
        "named like the plugin (`kit`), or a qualified name beside a lower skill named like its "
        "label (`admin:pdf`, `admin`): on the one of lower precedence, whose shared URIs are "
        "the other's and which every surface withholds (`UriCollisionError`, exit 4, naming "
        "the other); or on each skill of one name "
        "that collision_policy keep-all keeps, whose URIs every surface refuses and MCP "
        "serves none of: rename the skill, or choose another collision policy."),
    "name-confusable": Code(
        "Two skills' names look alike",
        "A warning the reindex records on each of the skills whose names are one name once "
        "Unicode-normalized (NFKC: `café` composed or decomposed, fullwidth letters) and with "
        "look-alike letters of other scripts read as Latin (Cyrillic `\u0440` as `p`): both "
        "still win their names, but a host or a person may load one for the other. Rename "
        "one of them."),
    # Trigger evals (`skillindex eval`)
    "eval-miss": Code(
        "A request meant for the skill chose others",
        "A should-trigger query of the skill's trigger evals did not rank it among the skills "
        "the host offers; the message names the skills ranked above it. Say in the description "
        "the words such requests use, and what sets the skill apart from those skills."),
    "eval-false-trigger": Code(
        "A request not meant for the skill chose it",
        "A should-not-trigger query ranked the skill among those the host offers. Narrow the "
        "description: say what the skill is not for, or drop the words it shares with that "
        "request."),
    "eval-not-run": Code(
        "The skill's trigger evals could not run",
        "The skill is not in the catalog it was indexed into (rejected, or withheld by "
        "risk_policy): `skillindex check` on its folder says why."),
    "description-overlap": Code(
        "Two skills' descriptions ask for the same requests",
        "The descriptions share so much of their wording that the requests meant for one "
        "would choose the other as readily: say in each what sets it apart."),
    # The barrier around each skill
    "internal-error": Code(
        "The skill could not be judged",
        "Something failed while this skill was read or judged; the others were judged. "
        "Report it with the message."),
}


def explained(code: str) -> Code:
    """The code's explanation; a code this table does not know gets a plain one."""
    return CODES.get(code) or Code(code, f"See the documentation of the finding code {code}.")

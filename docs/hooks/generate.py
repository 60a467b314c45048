"""MkDocs hook: pages and files generated at build time from the repository itself.

- ``reference/cli.md``: every command's ``--help``, exactly as Click prints it on a terminal of 100 columns or
  more, ``-h, --help`` included (mkdocs-click was tried: with Click 8.3 it shows ``Sentinel.UNSET`` as
  defaults and renders the docstrings as Markdown, so an ``<output>`` placeholder became an HTML tag and the
  example lines ran into one paragraph);
- ``reference/schema.md``: the result-format reference, rendered from ``mfu_sweep/schema/v1.json`` (so the
  page can never drift from the schema ``mfu-sweep validate`` uses);
- ``changelog.md``: ``CHANGELOG.md`` from the repository root;
- ``plots/*.png`` (and ``plots/published/*.png``): the committed figures, served from where they live.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "mfu_sweep" / "schema" / "v1.json"
SECTIONS = [
    ("sweep", "Sweep file", "One run on one device: the root object of a sweep file."),
    ("record", "Record", "One measured (pass, shape, dtype, mode): an element of `records`."),
    ("import", "Import block", "Provenance of an imported sweep (`device.backend = \"imported\"`)."),
    ("merged", "Merged file", "Several sweeps in one file, each with its provenance intact."),
    ("steps", "Step file", "A real model's steps on one device (`mfu-sweep steps`)."),
    ("step_run", "Step run", "One fresh-process run of a step file: an element of `runs`."),
]


def _type(spec: dict[str, Any], defs: dict[str, Any]) -> str:
    """A short human reading of one property's schema: type, constant, enum or reference."""
    if "$ref" in spec:
        name = spec["$ref"].rsplit("/", 1)[-1]
        title = next((title for key, title, _ in SECTIONS if key == name), None)
        if title is None:  # a small shared definition such as num_or_null: spell it out
            return _type(defs[name], defs)
        return f"[{title.lower()}](#{title.lower().replace(' ', '-')})"
    if "const" in spec:
        return f"`{json.dumps(spec['const'])}`"
    if "enum" in spec:
        return " \\| ".join(f"`{v}`" for v in spec["enum"])
    kind = spec.get("type", "any")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    if kind == "array" and "items" in spec:
        kind = f"array of {_type(spec['items'], defs)}"
    if kind == "object" and "additionalProperties" in spec:
        kind = f"object of {_type(spec['additionalProperties'], defs)}"
    return kind


def _limits(spec: dict[str, Any]) -> str:
    """Constraints of one property (bounds, lengths, patterns), comma-separated."""
    names = {"minimum": "≥ {}", "exclusiveMinimum": "> {}", "minLength": "length ≥ {}", "minItems": "items ≥ {}",
             "pattern": "pattern `{}`"}
    out = [fmt.format(spec[key]) for key, fmt in names.items() if key in spec]
    items = spec.get("items") or spec.get("additionalProperties") or {}
    out += [f"each {fmt.format(items[key])}" for key, fmt in names.items() if isinstance(items, dict) and key in items]
    return ", ".join(out)


def _rows(obj: dict[str, Any], defs: dict[str, Any], prefix: str = "") -> list[str]:
    """Table rows for the properties of ``obj``, nested objects flattened as ``parent.child``."""
    rows = []
    required = set(obj.get("required", []))
    for name, spec in obj.get("properties", {}).items():
        path = f"{prefix}{name}"
        desc = spec.get("description", "").replace("|", "\\|")
        kind = ", ".join(x for x in (_type(spec, defs), _limits(spec)) if x)
        rows.append(f"| `{path}` | {kind} | {'yes' if name in required else ''} | {desc} |")
        if spec.get("properties"):
            rows += _rows(spec, defs, f"{path}.")
    return rows


def _conditions(obj: dict[str, Any]) -> list[str]:
    """The schema's if/then rules of ``obj`` in words."""
    cond, then = obj.get("if"), obj.get("then")
    if not cond or not then:
        return []
    return [f"Rule: when the object matches `{json.dumps(cond['properties'])}`, it must also match "
            f"`{json.dumps(then)}`.", ""]


def schema_markdown(schema: dict[str, Any]) -> str:
    """The whole reference page for ``schema`` (the shipped v1 JSON Schema)."""
    defs = schema["$defs"]
    version = defs["sweep"]["properties"]["schema_version"]["const"]
    lines = [
        f"# Result format reference (schema version {version})",
        "",
        "Generated at build time from `mfu_sweep/schema/v1.json`, the JSON Schema (2020-12) that ships in the",
        "package and that `mfu-sweep validate` checks files against. " + schema.get("description", ""),
        "The prose guide to these fields is [Result format](../results.md).",
        "",
        "A file is one of: " + ", ".join(f"[{t.lower()}](#{t.lower().replace(' ', '-')})"
                                         for key, t, _ in SECTIONS if key in ("sweep", "merged", "steps")) + ".",
        "",
    ]
    for key, title, blurb in SECTIONS:
        obj = defs[key]
        lines += [f"## {title}", "", obj.get("description", blurb), "",
                  "| field | type | required | description |", "|---|---|---|---|",
                  *_rows(obj, defs), "", *_conditions(obj)]
    lines += ["Objects accept fields not listed here (additions within version 1 are optional and backwards "
              "compatible); the listed fields keep their meaning.", ""]
    return "\n".join(lines)


CLI_INTRO = """# Command line reference

Generated from the commands themselves: each section is exactly what `mfu-sweep COMMAND --help`
prints on a terminal 100 or more columns wide. Every command reads and writes the files described in
[Result format](../results.md); bad input gets a one-line error naming the field and the value and a
non-zero exit. Shell completion: see [Installation](../install.md#shell-completion).
"""


HELP_WIDTH = 98  # what --help fills on a terminal of 100 columns or more (max_content_width 100, less 2)


def cli_markdown(group: click.Group, prog: str = "mfu-sweep", width: int = HELP_WIDTH) -> str:
    """The CLI reference page: the group's ``--help``, then every command's, each in a text block.

    The contexts get the group's own settings (``-h, --help``, the content width), as an invocation does, and a
    fixed ``width``, so the page is the same whichever terminal builds it.
    """
    root = click.Context(group, info_name=prog, terminal_width=width, **group.context_settings)
    sections = [CLI_INTRO, f"## {prog}", "", "```text", group.get_help(root), "```", ""]
    for name in sorted(group.commands):
        cmd = group.commands[name]
        ctx = click.Context(cmd, info_name=name, parent=root)
        sections += [f"## {prog} {name}", "", "```text", cmd.get_help(ctx), "```", ""]
    return "\n".join(sections)


def on_files(files: Files, config: Any) -> Files:
    """Add the generated schema reference, the changelog and the committed figures to the site."""
    if str(ROOT) not in sys.path:  # document the checkout being built, not another install of the package
        sys.path.insert(0, str(ROOT))
    from mfu_sweep.cli import main

    files.append(File.generated(config, "reference/cli.md", content=cli_markdown(main)))
    files.append(File.generated(config, "reference/schema.md",
                                content=schema_markdown(json.loads(SCHEMA.read_text()))))
    files.append(File.generated(config, "changelog.md", content=(ROOT / "CHANGELOG.md").read_text()))
    for png in sorted((ROOT / "plots").rglob("*.png")):
        files.append(File.generated(config, png.relative_to(ROOT).as_posix(), abs_src_path=str(png)))
    return files

"""The JSON Schemas the package ships for its commands' ``--json`` outputs
(pyflatmodule/schemas/), and a check that a document follows one."""
from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jsonschema


def has_schema(command: str) -> bool:
    """Whether the package ships a schema for ``command``'s ``--json``."""
    return resources.files("pyflatmodule").joinpath("schemas",
                                                    f"{command}.schema.json").is_file()


def validate(doc: Any, command: str) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``doc`` follows ``command``'s schema
    (draft 2020-12, itself checked against the metaschema)."""
    text = resources.files("pyflatmodule").joinpath("schemas", f"{command}.schema.json")
    schema = json.loads(text.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)

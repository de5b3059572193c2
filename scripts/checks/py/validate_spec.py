"""The served OpenAPI document is a valid OpenAPI 3.1 document, and needs a key unless DOCS_PUBLIC=true."""

from __future__ import annotations

import sys

from openapi_spec_validator import OpenAPIV31SpecValidator

from common import raw, served_document


def main() -> int:
    with raw(None) as anonymous:
        refused = anonymous.get("/api/docs/openapi.json")
        if refused.status_code != 401:
            print(f"the document answered {refused.status_code} without a key (DOCS_PUBLIC is off)")
            return 1
    doc = served_document()
    errors = list(OpenAPIV31SpecValidator(doc).iter_errors())
    for error in errors[:40]:
        where = "/".join(str(p) for p in error.absolute_path)
        print(f"  {where}: {error.message[:300]}")
    operations = sum(
        1 for item in doc.get("paths", {}).values() for m in item if m in {"get", "put", "post", "delete", "patch"}
    )
    print(f"openapi-spec-validator: {len(errors)} errors over {operations} operations")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

"""GET /openapi.json: the API as OpenAPI 3.0, built from the models' field rules, a
module per part of the API.

Modules (docs/layout.md is the whole map; spec/test_map.py keeps both true):

    attempts.py         the OpenAPI of the attempt log and pausing
    console.py          the OpenAPI of what the console added
    document.py         the document and its blueprint: every part put together
    erasures.py         the OpenAPI of erasures
    filters.py          the OpenAPI of content filters
    parts.py            the pieces every OpenAPI operation is built from
    schemas.py          the OpenAPI of event schemas
    secrets.py          the OpenAPI of signing secrets and push keys
    transforms.py       the OpenAPI of transforms
"""

from app.web.openapi.document import blueprint

__all__ = ["blueprint"]

"""Event schemas' 400s over the API, as a publisher reads them: an invalid schema names the
JSON pointer of the fault in it and what is wrong there (not the meta-schema's bare
"not valid under any of the schemas listed in the 'anyOf' keyword"), a refused pattern
says why, and an event that breaks an `anyOf` is refused at the branch that explains it."""

from __future__ import annotations

from flask.testing import FlaskClient

ORDER = {
    "type": "object",
    "properties": {
        "total": {"anyOf": [{"type": "integer", "minimum": 0},
                            {"type": "string", "pattern": "^[0-9]+$"}]},
    },
}  # fmt: skip


def put(http: FlaskClient, pub: dict[str, str], schema: object) -> tuple[int, dict]:
    answer = http.put("/topics/orders/schemas/create", json=schema, headers=pub)
    return answer.status_code, answer.get_json()


def test_an_invalid_schema_is_a_400_at_the_pointer_of_the_fault(http: FlaskClient, pub):
    typo = {"type": "object", "properties": {"total": {"type": "numbr"}}}
    assert put(http, pub, typo) == (400, {"error": (
        'schema invalid at /properties/total/type: "numbr" is not one of "array", "boolean", '
        '"integer", "null", "number", "object", "string"'
    )})  # fmt: skip
    status, body = put(http, pub, {"properties": {"sku": {"pattern": "^(\\w)\\1$"}}})
    assert status == 400
    assert body["error"] == (
        'schema invalid at /properties/sku/pattern: "^(\\\\w)\\\\1$" is not a pattern busbar '
        "can run: invalid escape sequence: \\1 (a backreference: busbar's patterns run in "
        "linear time, so no backreferences and no lookaround)"
    )
    assert http.get("/topics/orders/schemas", headers=pub).get_json() == []


def test_an_event_that_breaks_an_any_of_is_refused_where_and_why(http: FlaskClient, pub):
    assert put(http, pub, ORDER)[0] == 200
    event = {"type": "create", "url": "https://o.test/1", "data": {"total": -3}}
    answer = http.post("/topics/orders", json=event, headers=pub)
    assert (answer.status_code, answer.get_json()) == (400, {"error": (
        "event 0 breaks the create schema of topic orders (version 1) at data/total: -3 is "
        "less than the minimum of 0 (rule /properties/total/anyOf/0/minimum)"
    )})  # fmt: skip

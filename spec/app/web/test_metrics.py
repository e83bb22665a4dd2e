"""GET /metrics: Prometheus text with the counters that publishing and delivery move."""

from __future__ import annotations

from flask.testing import FlaskClient

from spec.app.web.conftest import ROOT, subscribe


def test_metrics_in_prometheus_format(http: FlaskClient, pub, sub):
    subscribe(http, sub, ["orders"])
    events = [{"type": "create", "url": f"https://o.test/{i}"} for i in range(3)]
    http.post("/topics/orders", json=events, headers=pub)
    response = http.get("/metrics", headers=ROOT)
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain; version=0.0.4")
    text = response.get_data(as_text=True)
    assert "# TYPE busbar_events_published_total counter" in text
    assert "busbar_events_published_total 3" in text
    assert "busbar_events_added_total 3" in text
    assert 'busbar_subscriber_queue_events{subscriber="sub"} 3' in text
    assert 'busbar_jobs_count{queue="main",status="scheduled"} 1' in text
    assert "busbar_redis_used_memory " in text
    for line in text.splitlines():
        assert line.startswith("#") or line.startswith("busbar_")

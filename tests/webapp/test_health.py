from tests.own_apps import own_app


def test_healthz_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json == {"db": "ok", "redis": "ok"}


def test_healthz_names_redis_when_down(app_config):

    with own_app({**app_config, "REDIS_URL": "redis://127.0.0.1:1/0"}) as app:
        response = app.test_client().get("/healthz")
    assert response.status_code == 503
    assert response.json == {"db": "ok", "redis": "down"}

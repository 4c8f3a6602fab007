from webapp.extensions import db


def test_healthz_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json == {"db": "ok", "redis": "ok"}


def test_healthz_names_redis_when_down(app_config):
    from webapp import create_app

    app = create_app({**app_config, "REDIS_URL": "redis://127.0.0.1:1/0"}, environ={})
    with app.app_context():
        response = app.test_client().get("/healthz")
        db.session.remove()
        db.engine.dispose()
    assert response.status_code == 503
    assert response.json == {"db": "ok", "redis": "down"}

import subprocess
import sys

from webapp import REPO_ROOT


def run_cli(app_config, *args, stdin=""):
    env = {
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": app_config["DATABASE_URL"],
        "REDIS_URL": app_config["REDIS_URL"],
        "SECRET_KEY": app_config["SECRET_KEY"],
        "BROADSIDE_INSTANCE_PATH": app_config["INSTANCE_PATH"],
        "BROADSIDE_NAMESPACE": app_config["BROADSIDE_NAMESPACE"],
    }
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "webapp", *args],
        input=stdin, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )


def test_owner_create_and_token_create(app_config, client):
    result = run_cli(app_config, "owner", "create", "Boss@Example.com", "--password-stdin",
                     stdin="a long password\n")
    assert result.returncode == 0, result.stderr
    assert "boss@example.com" in result.stdout

    result = run_cli(app_config, "tokens", "create", "ci")
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip().splitlines()[-1]
    assert token.startswith("bs_")
    response = client.get("/api/whoami", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200

    listed = run_cli(app_config, "tokens", "list")
    assert "ci" in listed.stdout and token not in listed.stdout


def test_owner_create_rejects_short_password(app_config, app):
    result = run_cli(app_config, "owner", "create", "a@example.com", "--password-stdin", stdin="short\n")
    assert result.returncode != 0
    assert "at least 10 characters" in result.stderr

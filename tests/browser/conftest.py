import pytest


@pytest.fixture(params=["sqlite"])
def backend(request) -> str:
    """Browser tests drive the SQLite app: the database layer is proven on both elsewhere."""
    return request.param

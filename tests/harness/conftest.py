from tests.service.conftest import server  # noqa: F401  (the real server fixture)

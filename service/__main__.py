"""`python -m service`: one uvicorn worker (scale with replicas: each worker holds its own model copy). SIGHUP loads the
weights directory again without downtime (service/loading.py); SIGTERM drains and stops.

uvicorn closes idle keep-alive connections and the service refuses a body that arrives too slowly (service.http.body), but
uvicorn has no timeout for a request's headers: facing strangers, run it behind deploy/edge/haproxy.cfg, as
docker-compose.yml and deploy/kserve do."""

from __future__ import annotations

import logging
import sys

import uvicorn

from service.app import create_app
from service.http.auth import KeysError
from service.settings import get_settings
from service.tracing import LogContext

STARTUP_FAILURE = 3


def main() -> None:
    s = get_settings()
    # a line written while a request is served names it, and its trace when it is traced (service/tracing.py)
    logging.basicConfig(level=s.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s%(context)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(LogContext())
    try:
        app = create_app(s, load_in_background=True)  # the port answers (503 with Retry-After) while the models load
    except KeysError as e:
        logging.getLogger("capsnet.app").error("cannot start: %s", e)
        sys.exit(STARTUP_FAILURE)
    config = uvicorn.Config(
        app,
        host=s.host,
        port=s.port,
        workers=1,
        lifespan="on",
        log_level=s.log_level.lower(),
        timeout_graceful_shutdown=int(s.graceful_timeout_s),
        timeout_keep_alive=s.keepalive_timeout_s,
        access_log=False,
        server_header=False,
    )
    server = uvicorn.Server(config)
    app.state.capsnet.stop = lambda: setattr(server, "should_exit", True)  # models that fail to load end the process
    server.run()
    if not server.started or app.state.capsnet.failed:
        sys.exit(STARTUP_FAILURE)


if __name__ == "__main__":
    main()

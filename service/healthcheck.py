"""Container health probe: ``python -m service.healthcheck [--url URL] [--timeout S]``.

Docker's ``HEALTHCHECK`` (and the compose ``healthcheck``) run this inside the
container. It GETs ``http://127.0.0.1:${CAPSNET_PORT:-8000}/readyz`` and exits

* 0 when the service answers HTTP 200 (weights loaded, warm-up done),
* 1 otherwise, after printing one line saying why on stderr (Docker keeps it
  in ``docker inspect --format '{{json .State.Health}}'``).

Docker reserves exit code 2, so every failure, a bad command line included,
exits 1. The module uses the standard library only: the image has no curl,
and the probe should not pay for importing the web stack.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import urllib.error
import urllib.request

DEFAULT_PORT = 8000
DEFAULT_TIMEOUT_S = 3.0
READY_PATH = "/readyz"


def default_url() -> str:
    """The readiness URL of the service in this container (loopback, CAPSNET_PORT)."""
    port = os.environ.get("CAPSNET_PORT", "").strip() or str(DEFAULT_PORT)
    return f"http://127.0.0.1:{port}{READY_PATH}"


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # exit 1, not argparse's 2 (reserved by Docker)
        self.print_usage(sys.stderr)
        self.exit(1, f"unhealthy: bad arguments: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog="python -m service.healthcheck",
        description="Exit 0 if the CapsNet service answers 200 on /readyz, 1 otherwise.",
    )
    parser.add_argument(
        "--url",
        default=None,
        help="readiness URL to probe (default: http://127.0.0.1:${CAPSNET_PORT:-8000}/readyz)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds to wait for the answer (default: {DEFAULT_TIMEOUT_S:g})",
    )
    return parser


def probe(url: str, timeout: float = DEFAULT_TIMEOUT_S) -> tuple[bool, str]:
    """GET ``url``; return (healthy, one-line reason)."""
    # No proxies: an HTTP(S)_PROXY set for pip or the app must not capture a loopback probe.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "capsnet-healthcheck"})
        with opener.open(request, timeout=timeout) as response:
            status = response.status
            response.read(65536)
    except urllib.error.HTTPError as exc:  # 4xx/5xx, e.g. 503 while loading or draining
        exc.close()
        return False, f"HTTP {exc.code} from {url}"
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return False, f"no answer from {url} within {timeout:g} s"
        return False, f"cannot reach {url}: {reason}"
    except TimeoutError:
        return False, f"no answer from {url} within {timeout:g} s"
    except Exception as exc:  # reset connection, bad status line, malformed URL, ...
        return False, f"cannot probe {url}: {type(exc).__name__}: {exc}"
    if status != 200:
        return False, f"HTTP {status} from {url}"
    return True, f"HTTP 200 from {url}"


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad argument (1)
        return 0 if exc.code in (0, None) else 1
    url = args.url or default_url()
    healthy, reason = probe(url, args.timeout)
    if not healthy:
        print(f"unhealthy: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

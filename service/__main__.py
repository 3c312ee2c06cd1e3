"""`python -m service`: the service on CAPSNET_PORT, in one process or in CAPSNET_PROCESSES worker processes behind it
(service/processes.py). SIGHUP loads the weights directory again without downtime (service/loading.py); SIGTERM drains
and stops.

uvicorn closes idle keep-alive connections and the service refuses a body that arrives too slowly (service.http.body), but
uvicorn has no timeout for a request's headers: facing strangers, run it behind deploy/edge/haproxy.cfg, as
docker-compose.yml and deploy/kserve do."""

import signal

from service.group import HANDLED

# Blocked before anything starts a thread (numpy's and onnxruntime's imports do), so that every thread inherits the mask.
# The supervisor waits for these signals on its main thread (sigtimedwait), and the kernel hands a signal sent to the
# process to any thread that does not block it: there it would take the default action, killing the supervisor with no
# drain, or, the process being a container's PID 1, being dropped, and the container killed at the end of its stop
# grace period. Serving, a process unblocks each on its main thread once it has a handler for it (service/processes.py,
# service/app.py).
signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)

from service.processes import main  # noqa: E402

if __name__ == "__main__":
    main()

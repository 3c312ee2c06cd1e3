"""`python -m service`: the service on CAPSNET_PORT, in one process or in CAPSNET_PROCESSES worker processes behind it
(service/processes.py). SIGHUP loads the weights directory again without downtime (service/loading.py); SIGTERM drains
and stops.

uvicorn closes idle keep-alive connections and the service refuses a body that arrives too slowly (service.http.body), but
uvicorn has no timeout for a request's headers: facing strangers, run it behind deploy/edge/haproxy.cfg, as
docker-compose.yml and deploy/kserve do."""

from service.processes import main

if __name__ == "__main__":
    main()

"""moto's DynamoDB server, answering one request at a time.

moto runs each request on its own thread, and when a transaction fails it restores the whole table from a
snapshot taken when that transaction began. If another client's write lands in between, the restore silently
undoes it. Taking requests one at a time keeps every request atomic, as DynamoDB's are; clients still race with
each other between requests, which is what the store's version checks are for.

Usage: python moto_serial.py HOST PORT
"""

import sys
import threading

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple

moto = DomainDispatcherApplication(create_backend_app)
one_at_a_time = threading.Lock()


def serial(environ, start_response):
    with one_at_a_time:
        # The body is produced inside the lock: a WSGI app may do its work while it is iterated.
        return list(moto(environ, start_response))


if __name__ == "__main__":
    run_simple(
        sys.argv[1],
        int(sys.argv[2]),
        serial,
        threaded=True,
        request_handler=MotoRequestHandler,
    )

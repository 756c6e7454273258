"""moto's DynamoDB server, answering one request at a time.

moto runs each request on its own thread, and when a transaction fails it restores the whole table from a
snapshot taken when that transaction began. If another client's write lands in between, the restore silently
undoes it. Taking requests one at a time keeps every request atomic, as DynamoDB's are; clients still race with
each other between requests, which is what the store's version checks are for.

Two changes of moto's own bookkeeping keep a long test run fast, without changing what a request does or answers:
* a transaction snapshots the table for its rollback once per table, where moto took the same snapshot once per
  item (nothing is written until all are taken), which made a transaction cost its items times the table's size;
* numbers in exponent notation add up: moto reads an operand without a `.` as an integer, and its own Decimal sums
  write amounts under a millionth that way (`3E-7`, `0E-10`), so the next `ADD` or `SET a = a + :v` on such a
  counter failed (`invalid literal for int()`) where DynamoDB adds them (the cost counters of embeddings, at $0.02
  per million tokens, hold such amounts). Integers still add as integers;
* model objects are not tracked: moto remembers every one it ever made, for its dashboard (`/moto-api/`, unused
  here), so every snapshot's copies stayed alive. A long run grew moto to many GB, and the garbage collector's
  passes over them stalled requests for seconds at a time.

Usage: python moto_serial.py HOST PORT
"""

import copy
import decimal
import sys
import threading
import types

import moto.dynamodb.models as dynamodb
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.core.common_models import BaseModel
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple


def _untracked(cls, *args, **kwargs):
    return object.__new__(cls)


BaseModel.__new__ = staticmethod(_untracked)

def _number(text):
    try:
        return int(text)
    except ValueError:
        return decimal.Decimal(text)


def _arithmetic(original, operate):
    def numbers(self, other):
        if self.is_number() and other.is_number() and self.type == other.type:
            return DynamoType({"N": f"{operate(_number(self.value), _number(other.value))}"})
        return original(self, other)

    return numbers


DynamoType.__add__ = _arithmetic(DynamoType.__add__, lambda a, b: a + b)
DynamoType.__sub__ = _arithmetic(DynamoType.__sub__, lambda a, b: a - b)

_transact_write_items = dynamodb.DynamoDBBackend.transact_write_items


def _one_snapshot_per_table(backend, transact_items):
    snapshots = {}

    def deepcopy(obj, memo=None):
        if isinstance(obj, dynamodb.Table):
            if id(obj) not in snapshots:
                snapshots[id(obj)] = copy.deepcopy(obj, memo)
            return snapshots[id(obj)]
        return copy.deepcopy(obj, memo)

    # Safe to swap module-wide: requests are taken one at a time (below).
    dynamodb.copy = types.SimpleNamespace(deepcopy=deepcopy)
    try:
        return _transact_write_items(backend, transact_items)
    finally:
        dynamodb.copy = copy


dynamodb.DynamoDBBackend.transact_write_items = _one_snapshot_per_table

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

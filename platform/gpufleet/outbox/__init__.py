"""Transactional outbox: work for the workers is recorded in the database with the write that causes it.

A write (approve, PATCH, quota change...) must not depend on the broker being up at that instant.
`enqueue()` adds an `OutboxMessage` row in the caller's transaction; after commit the message is
handed to Celery and the row removed. If the broker is down the request still succeeds (the row
stays) and `relay()` -- run by beat every GPUFLEET_OUTBOX_RELAY_SECONDS and by every worker when
it starts -- sends it once the broker is back. Tasks are idempotent, so a message sent twice (a
relay racing the after-commit send) costs a no-op run, never a wrong result.
"""

"""once.proto — the messages of the shipped .proto files, generated at build
time by Debian's protoc (--python_out): once_pb2 (envelope, Counter, Lease,
Admin), grants_pb2 (Grants), kv_pb2 (KV) and outbox_pb2 (Outbox, and the
SystemEvent payload of the once.system topic; it shares grants_pb2's pool,
since it imports grants.proto). Nothing here is written by hand."""

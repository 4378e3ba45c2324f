"""once.proto — the messages of the shipped .proto files, generated at build
time by Debian's protoc (--python_out): once_pb2 (envelope, Counter, Lease,
Admin) and grants_pb2 (Grants). Nothing here is written by hand."""

# Unit tests of the server's parts, each against real objects (a real
# LevelDB in a temp dir, a real lease table, the real collector driven by a
# test clock) — no onced process, no sleeps for time.
set(ONCE_UNIT_TESTS test_lease_table test_store test_gc test_admit)
foreach(name ${ONCE_UNIT_TESTS})
  add_executable(${name} ${name}.c)
  target_link_libraries(${name} PRIVATE once_gc once_lease once_store
                        once_proto PkgConfig::CMOCKA Threads::Threads)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 LABELS unit)
endforeach()

# The Prometheus text writer of the metrics endpoint (server/prom_text.c).
add_executable(test_prom_text test_prom_text.c)
target_link_libraries(test_prom_text PRIVATE once_server PkgConfig::CMOCKA)
add_test(NAME test_prom_text COMMAND test_prom_text)
set_tests_properties(test_prom_text PROPERTIES TIMEOUT 60 LABELS unit)

# The chunked-body decoder of the HTTP listener (server/http_chunked.c).
add_executable(test_http_chunked test_http_chunked.c)
target_link_libraries(test_http_chunked PRIVATE once_server PkgConfig::CMOCKA)
add_test(NAME test_http_chunked COMMAND test_http_chunked)
set_tests_properties(test_http_chunked PROPERTIES TIMEOUT 60 LABELS unit)

# proto3's JSON mapping (http/json_pb.h) over every message of proto/ and
# test-only messages with every scalar type (json_types.proto) and with
# presence (json_presence.proto, proto2); the
# descriptors are listed from the generated headers (pb_descriptors.py).
once_protoc_c(JSON_TEST_PROTO_SRCS json_types json_presence)
set(PB_SHIPPED once record grants kv outbox)
list(TRANSFORM PB_SHIPPED REPLACE "(.+)" "proto/\\1.pb-c.h" OUTPUT_VARIABLE PB_SHIPPED_H)
add_custom_command(
  OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/pb_shipped.c ${CMAKE_CURRENT_BINARY_DIR}/pb_typed.c
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/pb_descriptors.py
          ${CMAKE_CURRENT_BINARY_DIR}/pb_shipped.c shipped ${PROJECT_BINARY_DIR} ${PB_SHIPPED_H}
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/pb_descriptors.py
          ${CMAKE_CURRENT_BINARY_DIR}/pb_typed.c typed ${PROJECT_BINARY_DIR} tests/json_types.pb-c.h
          tests/json_presence.pb-c.h
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/pb_descriptors.py once_proto
          ${CMAKE_CURRENT_BINARY_DIR}/json_types.pb-c.h
          ${CMAKE_CURRENT_BINARY_DIR}/json_presence.pb-c.h
  COMMENT "pb_descriptors.py: the descriptors test_json_pb walks")
add_executable(test_json_pb test_json_pb.c ${JSON_TEST_PROTO_SRCS}
  ${CMAKE_CURRENT_BINARY_DIR}/pb_shipped.c ${CMAKE_CURRENT_BINARY_DIR}/pb_typed.c)
target_compile_definitions(test_json_pb PRIVATE PROTO_DIR="${PROJECT_SOURCE_DIR}/proto")
target_link_libraries(test_json_pb PRIVATE once_json once_proto PkgConfig::CMOCKA m)
add_test(NAME test_json_pb COMMAND test_json_pb)
set_tests_properties(test_json_pb PROPERTIES TIMEOUT 120 LABELS unit)

# The journal's merged LevelDB writes (client/journal_group.c), on a real
# LevelDB in a temp dir, from many threads at once, and the reply log they
# carry (client/journal_replies.c, a new file every 4 KiB instead of 4 MiB).
add_executable(test_journal_group test_journal_group.c
  ${PROJECT_SOURCE_DIR}/client/journal_group.c
  ${PROJECT_SOURCE_DIR}/client/journal_replies.c)
target_compile_definitions(test_journal_group PRIVATE JR_FILE_SIZE=4096)
target_include_directories(test_journal_group PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(test_journal_group PRIVATE once_base once_sys_helpers
                      leveldb::leveldb PkgConfig::CMOCKA Threads::Threads)
add_test(NAME test_journal_group COMMAND test_journal_group)
set_tests_properties(test_journal_group PROPERTIES TIMEOUT 120 LABELS unit)


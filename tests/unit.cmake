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

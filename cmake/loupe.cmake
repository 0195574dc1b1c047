# Helpers shared by every layer's CMakeLists.txt.

# Finds the Debian packages loupe builds against (scripts/bootstrap.sh installs them)
# and exposes each as an imported target named lp::<name>.
macro(lp_find_dependencies)
  find_package(PkgConfig REQUIRED)
  find_package(Threads REQUIRED)
  find_package(ZLIB REQUIRED)
  find_package(OpenMP REQUIRED COMPONENTS C)
  pkg_check_modules(LP_OPENBLAS REQUIRED IMPORTED_TARGET openblas)
  pkg_check_modules(LP_CJSON REQUIRED IMPORTED_TARGET libcjson)
  pkg_check_modules(LP_UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
  pkg_check_modules(LP_PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
  pkg_check_modules(LP_YAML REQUIRED IMPORTED_TARGET yaml-0.1)
  pkg_check_modules(LP_CAIRO REQUIRED IMPORTED_TARGET cairo)
  pkg_check_modules(LP_FONTCONFIG REQUIRED IMPORTED_TARGET fontconfig) # charts: its caches freed at exit
  pkg_check_modules(LP_YAJL REQUIRED IMPORTED_TARGET yajl) # the streaming trace reader
  set(lp_deps OPENBLAS CJSON UTF8PROC PCRE2 YAML CAIRO FONTCONFIG YAJL)
  # cmocka only for the tests (scripts/deps-debian-test.txt): LP_TESTS, top CMakeLists.txt
  set(LP_HAVE_TESTS OFF)
  if(LP_TESTS STREQUAL "ON")
    pkg_check_modules(LP_CMOCKA REQUIRED IMPORTED_TARGET cmocka)
  elseif(NOT LP_TESTS STREQUAL "OFF")
    pkg_check_modules(LP_CMOCKA QUIET IMPORTED_TARGET cmocka)
  endif()
  if(LP_CMOCKA_FOUND AND NOT LP_TESTS STREQUAL "OFF")
    set(LP_HAVE_TESTS ON)
    list(APPEND lp_deps CMOCKA)
  endif()
  foreach(dep ${lp_deps})
    string(TOLOWER ${dep} lower)
    add_library(lp::${lower} ALIAS PkgConfig::LP_${dep})
  endforeach()
endmacro()

# lp_add_layer(NAME SOURCES ... [DEPS ...]): a static library lp_<NAME> whose public
# headers are include/loupe/*.h. DEPS are other targets it links publicly.
function(lp_add_layer name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  add_library(lp_${name} STATIC ${A_SOURCES})
  target_include_directories(lp_${name}
    PUBLIC ${PROJECT_SOURCE_DIR}/include
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(lp_${name} PUBLIC ${A_DEPS})
  set_property(GLOBAL APPEND PROPERTY LP_LAYERS lp_${name})
endfunction()

# lp_add_test(NAME SOURCES ... [LIBS ...] [LABELS ...] [TIMEOUT s] [ARGS ...]):
# a cmocka test executable registered with ctest. Tests run from the source tree's
# root so fixtures are found by relative path; LP_SOURCE_DIR is also exported.
function(lp_add_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${A_LIBS} lp::cmocka)
  add_test(NAME ${name} COMMAND ${name} ${A_ARGS} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set(env "LP_SOURCE_DIR=${PROJECT_SOURCE_DIR};LP_BUILD_DIR=${PROJECT_BINARY_DIR}")
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${env}")
  if(A_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}")
  endif()
  if(A_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${A_TIMEOUT})
  endif()
endfunction()

# lp_add_script_test(NAME COMMAND ... [LABELS ...] [TIMEOUT s]): a test that runs a
# script (shell or Python) from the source root with the built loupe on PATH.
function(lp_add_script_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "COMMAND;LABELS" ${ARGN})
  add_test(NAME ${name} COMMAND ${A_COMMAND} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set(env "LP_SOURCE_DIR=${PROJECT_SOURCE_DIR};LP_BUILD_DIR=${PROJECT_BINARY_DIR};LOUPE=$<TARGET_FILE:loupe>")
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${env}" SKIP_RETURN_CODE 77)
  if(A_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}")
  endif()
  if(A_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${A_TIMEOUT})
  endif()
endfunction()

# ferry_add_pytest_files(PREFIX <name> DIR <folder> TIMEOUT <s> LABELS <labels...>
#                        COMMAND <argv...> [ENVIRONMENT <VAR=value...>])
# One ctest per pytest file (<folder>/test_*.py), named "<name>: <file>", so ctest runs the
# files side by side and reports each. COMMAND is a pytest command line the file is appended
# to, loading the ferry_skip_status plugin beside this file (`-p ferry_skip_status`; this
# folder is put on PYTHONPATH): a file whose every test was skipped exits 77, which
# SKIP_RETURN_CODE turns into ctest's "Skipped". Files are found at configure time
# (CONFIGURE_DEPENDS: a new one is picked up at the next build).
# Sets FERRY_PYTEST_TESTS to the names of the tests it added; a slow file's own properties
# (a slow label, COST, PROCESSORS) are set by the caller after.
set(FERRY_PYTEST_PLUGIN_DIR ${CMAKE_CURRENT_LIST_DIR})

function(ferry_add_pytest_files)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "PREFIX;DIR;TIMEOUT" "LABELS;COMMAND;ENVIRONMENT")
  file(GLOB files CONFIGURE_DEPENDS ${arg_DIR}/test_*.py)
  if(NOT files)
    message(FATAL_ERROR "ferry_add_pytest_files: no test_*.py in ${arg_DIR}")
  endif()
  set(tests)
  foreach(file IN LISTS files)
    get_filename_component(name ${file} NAME)
    set(test "${arg_PREFIX}: ${name}")
    add_test(NAME "${test}" COMMAND ${arg_COMMAND} ${file})
    set_tests_properties("${test}" PROPERTIES LABELS "${arg_LABELS}" TIMEOUT ${arg_TIMEOUT} SKIP_RETURN_CODE 77
      ENVIRONMENT "PYTHONPATH=${FERRY_PYTEST_PLUGIN_DIR};PYTHONDONTWRITEBYTECODE=1;${arg_ENVIRONMENT}")
    list(APPEND tests "${test}")
  endforeach()
  set(FERRY_PYTEST_TESTS "${tests}" PARENT_SCOPE)
endfunction()

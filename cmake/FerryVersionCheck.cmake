# The header's FERRY_VERSION_MAJOR/MINOR/PATCH must be project(VERSION): the
# shared library's SONAME, ferry-config-version.cmake and ferry.pc take the
# project's, ferry_version() the header's. ferry.h stays a plain file a reader
# can open, so it is checked at configure time instead of generated.
# Also runs as a script, to try the check on another header:
#   cmake -DFERRY_HEADER=ferry.h -DFERRY_EXPECTED_VERSION=1.2.3 -P FerryVersionCheck.cmake
function(ferry_check_header_version header expected)
  file(STRINGS ${header} lines REGEX "^#define FERRY_VERSION_(MAJOR|MINOR|PATCH) ")
  set(found "")
  foreach(part MAJOR MINOR PATCH)
    set(value "")
    foreach(line IN LISTS lines)
      if(line MATCHES "^#define FERRY_VERSION_${part} +([0-9]+) *$")
        set(value ${CMAKE_MATCH_1})
      endif()
    endforeach()
    if(value STREQUAL "")
      message(FATAL_ERROR "${header}: no '#define FERRY_VERSION_${part} <number>'")
    endif()
    list(APPEND found ${value})
  endforeach()
  list(JOIN found "." found)
  if(NOT found STREQUAL expected)
    message(FATAL_ERROR "${header} says version ${found} but project(VERSION) says ${expected}: "
                        "change both together")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE)
  ferry_check_header_version(${FERRY_HEADER} ${FERRY_EXPECTED_VERSION})
else()
  # Not rerun when only the header changes (every doc edit would reconfigure):
  # the test "packaging: ferry_version() is project(VERSION)" catches that.
  ferry_check_header_version(${PROJECT_SOURCE_DIR}/include/ferry/ferry.h ${PROJECT_VERSION})
endif()

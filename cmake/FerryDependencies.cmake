# Every dependency comes from Debian's archive (tools/install-deps installs them).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(OpenSSL 3 REQUIRED)
find_package(spdlog REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)

find_path(ASIO_INCLUDE_DIR asio.hpp REQUIRED)
add_library(ferry_asio INTERFACE)
target_include_directories(ferry_asio SYSTEM INTERFACE ${ASIO_INCLUDE_DIR})
# ASIO_DISABLE_STD_ALIGNED_ALLOC: Asio picks aligned_alloc/free or operator
# new/delete per translation unit, from whether a standard header happened to be
# included before it; its per-thread allocation cache then frees memory from one
# with the other (undefined behaviour; ASan's alloc-dealloc-mismatch). One choice everywhere.
target_compile_definitions(ferry_asio INTERFACE ASIO_STANDALONE ASIO_NO_DEPRECATED ASIO_DISABLE_STD_ALIGNED_ALLOC)
target_link_libraries(ferry_asio INTERFACE Threads::Threads)
# TSan does not model standalone fences, and GCC refuses them under -fsanitize=thread.
# Asio's fenced blocks only back up the mutexes its scheduler already takes, which TSan sees.
if(FERRY_SANITIZE MATCHES "thread")
  target_compile_definitions(ferry_asio INTERFACE ASIO_DISABLE_FENCED_BLOCK)
endif()

if(FERRY_BUILD_TOOLS OR FERRY_BUILD_TESTS)
  find_package(CLI11 REQUIRED)
endif()
if(FERRY_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
endif()
# The master's /status is JSON (nlohmann/json: nlohmann-json3-dev, also the WAN
# emulator's topology files) and its /metrics Prometheus' text format (prometheus-cpp-dev).
find_package(nlohmann_json 3.10 REQUIRED)
find_package(prometheus-cpp REQUIRED COMPONENTS core)

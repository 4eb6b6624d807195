# Flags every ferry target shares, as one interface target.
add_library(ferry_compile_options INTERFACE)

# C and C++ only: CUDA sources (src/cuda/) set nvcc's own flags, and a target that
# links a ferry library must not hand these to nvcc.
set(_ferry_cxx "$<COMPILE_LANGUAGE:C,CXX>")
target_compile_options(ferry_compile_options INTERFACE
  "$<${_ferry_cxx}:-Wall;-Wextra;-Wpedantic;-Wshadow;-Wconversion;-Wno-sign-conversion>"
  # Bit-exactness across machines: an FMA that one compiler contracts and another
  # does not would give two peers different bits for the same dequantize.
  "$<${_ferry_cxx}:-ffp-contract=off>")
if(FERRY_WERROR)
  target_compile_options(ferry_compile_options INTERFACE "$<${_ferry_cxx}:-Werror>")
endif()
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  # The kernels ask for vectorization (pragmas); instrumented builds (sanitizers,
  # fuzzing) cannot always honour it. A missed hint is not a bug.
  target_compile_options(ferry_compile_options INTERFACE "$<${_ferry_cxx}:-Wno-pass-failed>")
endif()
if(FERRY_NATIVE)
  target_compile_options(ferry_compile_options INTERFACE "$<${_ferry_cxx}:-march=native>")
endif()

if(FERRY_SANITIZE)
  string(REPLACE "," ";" _ferry_sanitizers "${FERRY_SANITIZE}")
  foreach(_s IN LISTS _ferry_sanitizers)
    if(NOT _s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "FERRY_SANITIZE: unknown sanitizer '${_s}' (address, undefined, thread)")
    endif()
  endforeach()
  if("thread" IN_LIST _ferry_sanitizers AND "address" IN_LIST _ferry_sanitizers)
    message(FATAL_ERROR "FERRY_SANITIZE: thread cannot be combined with address")
  endif()
  # -O1 -g1 (after the build type's -O3, so it wins): reports keep file:line stacks and
  # the instrumented build compiles in about half the time of -O2 -g (CI builds it twice).
  add_compile_options(-fsanitize=${FERRY_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all -O1 -g1)
  # GCC's flow analysis gives false maybe-uninitialized reports inside libstdc++
  # (std::function in <regex>) once ASan instruments it; real bugs are what the sanitizers catch.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  add_link_options(-fsanitize=${FERRY_SANITIZE})
endif()

message(STATUS "ferry: sanitizers '${FERRY_SANITIZE}', native ${FERRY_NATIVE}")

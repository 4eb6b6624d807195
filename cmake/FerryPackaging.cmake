# Install the C API: library, header, CMake package (find_package(ferry)) and pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS ferry EXPORT ferryTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/ferry/ferry.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ferry)
install(EXPORT ferryTargets NAMESPACE ferry:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ferry)

file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/ferry-config.cmake.in
  "@PACKAGE_INIT@\ninclude(\"\${CMAKE_CURRENT_LIST_DIR}/ferryTargets.cmake\")\n")
configure_package_config_file(${CMAKE_CURRENT_BINARY_DIR}/ferry-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ferry-config.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ferry)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ferry-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ferry-config.cmake ${CMAKE_CURRENT_BINARY_DIR}/ferry-config-version.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ferry)

# Relocatable: the prefix is found from the .pc file's own place, so a tree
# installed with `cmake --install --prefix DIR` (or moved) still points at itself
# (absolute install dirs cannot move: they are written as given).
# libferry is shared and carries its own dependencies: no Libs.private needed.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(_ferry_pc_prefix "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _ferry_pc_up "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  string(REGEX REPLACE "/$" "" _ferry_pc_up "${_ferry_pc_up}")
  set(_ferry_pc_prefix "\${pcfiledir}/${_ferry_pc_up}")
endif()
set(_ferry_pc_dirs "")
foreach(_dir LIBDIR INCLUDEDIR)
  string(TOLOWER ${_dir} _name)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_dir}}")
    string(APPEND _ferry_pc_dirs "${_name}=${CMAKE_INSTALL_${_dir}}\n")
  else()
    string(APPEND _ferry_pc_dirs "${_name}=\${prefix}/${CMAKE_INSTALL_${_dir}}\n")
  endif()
endforeach()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/ferry.pc
  "prefix=${_ferry_pc_prefix}\n${_ferry_pc_dirs}\n"
  "Name: ferry\nDescription: peer-to-peer WAN training runtime (C API)\nVersion: ${PROJECT_VERSION}\n"
  "Libs: -L\${libdir} -lferry\nCflags: -I\${includedir}\n")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ferry.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The Python package, where Debian's python3 finds it once installed under /usr (the .deb:
# cmake/FerryDebian.cmake). It loads the libferry installed beside it (ferry/_lib.py).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/bindings/python/ferry DESTINATION lib/python3/dist-packages
  PATTERN __pycache__ EXCLUDE PATTERN _bundled EXCLUDE)

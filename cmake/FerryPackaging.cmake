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

file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/ferry.pc
  "prefix=${CMAKE_INSTALL_PREFIX}\nlibdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}\nincludedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}\n\n"
  "Name: ferry\nDescription: peer-to-peer WAN training runtime (C API)\nVersion: ${PROJECT_VERSION}\n"
  "Libs: -L\${libdir} -lferry\nCflags: -I\${includedir}\n")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ferry.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

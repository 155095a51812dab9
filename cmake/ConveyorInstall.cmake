# ConveyorInstall.cmake -- `cmake --install` and find_package(conveyor).
#
# Installs the `conveyor` command, the model shapes and example settings
# (share/conveyor/configs), and the engine as a library: its headers under
# include/conveyor (a program includes "actors/engine.hpp" as the examples
# do), its static libraries, and a CMake package whose targets are
#   conveyor::engine    the engine actors (actors/engine.hpp), models, CPU backend
#   conveyor::pipeline  typed pipeline stages (actors/pipeline.hpp)
#   conveyor::http      the OpenAI-compatible server (http/server.hpp)
#   conveyor::router    the router over several nodes (router/)
# The same names are aliases in this tree, for add_subdirectory or
# FetchContent (where CONVEYOR_INSTALL, off there, leaves the install rules out). The libraries are built with the build's flags: with
# CONVEYOR_NATIVE (the default) they are tuned for the build machine, so
# configure with -DCONVEYOR_NATIVE=OFF for an installation other machines use
# (the kernels pick AVX2, AVX-512 or AMX at run time either way).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CONVEYOR_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/conveyor)

# The libraries a program that embeds the engine links, with their
# dependencies among ours; `conveyor_engine` becomes conveyor::engine.
set(conveyor_exported_libraries
  conveyor_base conveyor_grammar conveyor_kernels_cpu conveyor_model_core conveyor_tokenizer
  conveyor_formats conveyor_sampling conveyor_jinja conveyor_policies conveyor_engine_core
  conveyor_host_sampling conveyor_forward conveyor_backend_cpu conveyor_engine conveyor_pipeline
  conveyor_http conveyor_router)
if(CONVEYOR_HAVE_CUDA)
  list(APPEND conveyor_exported_libraries conveyor_kernels_cuda)
endif()

foreach(target IN LISTS conveyor_exported_libraries)
  string(REGEX REPLACE "^conveyor_" "" name ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  # Headers are found from the source tree here and from include/conveyor
  # once installed (each library set ${PROJECT_SOURCE_DIR} as its own).
  set_property(TARGET ${target} PROPERTY INTERFACE_INCLUDE_DIRECTORIES
    "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>"
    "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/conveyor>")
endforeach()
foreach(name engine pipeline http router)
  add_library(conveyor::${name} ALIAS conveyor_${name})
endforeach()

if(NOT CONVEYOR_INSTALL)  # under add_subdirectory / FetchContent: the targets only
  return()
endif()

install(TARGETS ${conveyor_exported_libraries} EXPORT conveyorTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS conveyor RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Every header of the library's folders, in their layout (tests, benchmarks,
# examples and tools are not part of it; the kernels' .inc files are
# included by their .cpp files only).
foreach(dir base grammar kernels model template policies engine backends actors http router)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/conveyor/${dir}
    FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/
  DESTINATION ${CMAKE_INSTALL_DATADIR}/conveyor/configs)

install(EXPORT conveyorTargets NAMESPACE conveyor:: DESTINATION ${CONVEYOR_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/conveyorConfig.cmake.in
  ${PROJECT_BINARY_DIR}/conveyorConfig.cmake
  INSTALL_DESTINATION ${CONVEYOR_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/conveyorConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/conveyorConfig.cmake
              ${PROJECT_BINARY_DIR}/conveyorConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindCAF.cmake
        DESTINATION ${CONVEYOR_INSTALL_CMAKEDIR})

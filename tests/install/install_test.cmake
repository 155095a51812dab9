# `cmake --install` of the build into a fresh prefix, then a project outside
# the tree (consumer/) found it with find_package(conveyor), built against
# the installed headers and libraries alone, and run.
# -DBUILD_DIR, -DWORK_DIR, -DCONSUMER_DIR, -DCXX, -DGENERATOR, -DBUILD_TYPE.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " command)
    message(FATAL_ERROR "failed (${rc}): ${command}")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(file bin/conveyor include/conveyor/actors/engine.hpp include/conveyor/http/server.hpp
             share/conveyor/configs/models/llama-15m.toml)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "not installed: ${prefix}/${file}")
  endif()
endforeach()
# The source tree must not be what the consumer compiles against.
get_filename_component(source_dir ${CMAKE_CURRENT_LIST_DIR}/../.. ABSOLUTE)
file(GLOB_RECURSE config_files ${prefix}/*/conveyorTargets*.cmake)
if(NOT config_files)
  message(FATAL_ERROR "no conveyorTargets*.cmake under ${prefix}")
endif()
foreach(f IN LISTS config_files)
  file(READ ${f} text)
  string(FIND "${text}" "${source_dir}/" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${f} names the source tree")
  endif()
endforeach()

run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
run(${WORK_DIR}/consumer/consumer)
run(${prefix}/bin/conveyor generate --model dummy:llama-15m --prompt-ids 1,2 --max-tokens 2 --ids)
# A shape only the installation has: the installed command finds it beside
# itself, wherever the prefix is.
file(COPY_FILE ${prefix}/share/conveyor/configs/models/llama-15m.toml
     ${prefix}/share/conveyor/configs/models/install-check.toml)
run(${prefix}/bin/conveyor generate --model dummy:install-check --prompt-ids 1,2 --max-tokens 2 --ids)

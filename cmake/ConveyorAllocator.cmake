# conveyor_link_allocator(DIR LIBRARY): links LIBRARY (a malloc replacement)
# into every executable defined in DIR and the directories below it: first
# on the link line, so that its malloc is the one every library resolves,
# and with --no-as-needed, since nothing names its symbols (it replaces
# malloc by being loaded). The libraries after it are linked as needed or
# not as the toolchain's default says for them; Debian's is not.
function(conveyor_link_allocator dir library)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "EXECUTABLE")
      target_link_options(${target} PRIVATE "LINKER:--no-as-needed,${library}")
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    conveyor_link_allocator(${subdir} ${library})
  endforeach()
endfunction()

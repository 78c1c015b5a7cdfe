# Whether the Metal compiler is installed: a Mac with only the Command Line Tools has xcrun but
# neither `metal` nor `metallib` (the full Xcode, or its Metal toolchain component, has both).
function(swisk_metal_toolchain xcrun out)
  set(ok OFF)
  if(xcrun)
    execute_process(COMMAND ${xcrun} -sdk macosx -f metal RESULT_VARIABLE r1 OUTPUT_QUIET ERROR_QUIET)
    execute_process(COMMAND ${xcrun} -sdk macosx -f metallib RESULT_VARIABLE r2 OUTPUT_QUIET ERROR_QUIET)
    if(r1 EQUAL 0 AND r2 EQUAL 0)
      set(ok ON)
    endif()
  endif()
  set(${out} ${ok} PARENT_SCOPE)
endfunction()

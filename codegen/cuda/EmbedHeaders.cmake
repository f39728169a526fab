# Writes the headers generated CUDA kernels include as a C++ initializer
# list of {include name, text} (codegen/cuda/CudaEmitter.cpp, cudaHeaders):
#   cmake -DROOT=<source root> -DOUT=<file> -P EmbedHeaders.cmake
set(files "codegen/cuda/Prelude.cuh;ir/IntPow.h;ir/IntShift.h")
set(names "kiln/Prelude.cuh;ir/IntPow.h;ir/IntShift.h")
set(text "// Generated from ${files} by codegen/cuda/EmbedHeaders.cmake.\n")
foreach(file name IN ZIP_LISTS files names)
  file(READ "${ROOT}/${file}" content)
  string(APPEND text "{\"${name}\", R\"kiln_embedded(${content})kiln_embedded\"},\n")
endforeach()
file(WRITE "${OUT}.tmp" "${text}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")

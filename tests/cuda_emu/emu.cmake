# The CUDA emulation (tests/cuda_emu/, docs/BACKENDS.md): src/backend/cuda/*.cu compiled as host C++ by the
# C++ compiler against cuda_emu.h, after cu2cpp.py's rewrite of launches and __shared__ declarations, with
# the emulation's runtime (fibers, streams, the library stand-ins: every tests/cuda_emu/*.cpp). It gives
#   ctron_core_emu  the CPU sources + cuda_backend.c + the emulated kernels; no libcudart, no cuBLASLt;
#   ctron-emu       ctron on it: `ctron-emu train --device cuda ...` runs the model on the emulated GPU;
#   the cuda-emu tests (tests/cuda_emu/CMakeLists.txt).
# Built by default wherever the CUDA toolkit's headers are (CI has them, no GPU); -DCTRON_CUDA_EMU=OFF
# leaves it out.
option(CTRON_CUDA_EMU "build the CUDA emulation (ctron_core_emu, ctron-emu, label cuda-emu) where the CUDA headers are" ON)
if(CTRON_CUDA_EMU AND NOT CTRON_FUZZ)
  if(NOT CUDAToolkit_FOUND)
    find_package(CUDAToolkit QUIET)
  endif()
  find_path(CTRON_EMU_CUDA_INCLUDE NAMES cuda_runtime.h cublasLt.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_package(Python3 COMPONENTS Interpreter QUIET)
endif()
if(NOT CTRON_CUDA_EMU OR CTRON_FUZZ OR NOT CTRON_EMU_CUDA_INCLUDE OR NOT Python3_Interpreter_FOUND)
  message(STATUS "CUDA emulation: not built (needs the CUDA toolkit's headers and python3, or CTRON_CUDA_EMU=OFF)")
  return()
endif()
enable_language(CXX)
set(CMAKE_CXX_FLAGS_RELEASE "-O2 -march=native -fno-math-errno -fno-trapping-math")
set(emu_dir ${PROJECT_SOURCE_DIR}/tests/cuda_emu)

# The rewrite, at build time: the .cu files stay the project's only copy.
file(GLOB emu_cu CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backend/cuda/*.cu)
set(emu_kernel_sources)
foreach(cu ${emu_cu})
  get_filename_component(name ${cu} NAME)
  set(out ${CMAKE_BINARY_DIR}/cuda_emu/${name}.cpp)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/cuda_emu
    COMMAND ${Python3_EXECUTABLE} ${emu_dir}/cu2cpp.py ${cu} ${out}
    DEPENDS ${cu} ${emu_dir}/cu2cpp.py
    COMMENT "cu2cpp.py ${name}")
  list(APPEND emu_kernel_sources ${out})
endforeach()
file(GLOB emu_runtime_sources CONFIGURE_DEPENDS ${emu_dir}/*.cpp)

# -O2 and no FMA contraction (the CPU backend's C is not contracted either); C++17 for the kernels'
# `if constexpr`. The stand-ins' include/ (cub/...) comes before the toolkit's.
function(ctron_emu_cxx target)
  set_target_properties(${target} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF
    POSITION_INDEPENDENT_CODE OFF)
  target_include_directories(${target} BEFORE PRIVATE ${emu_dir}/include)
  target_include_directories(${target} PRIVATE ${emu_dir} ${PROJECT_SOURCE_DIR}/src ${CTRON_EMU_CUDA_INCLUDE}
    ${CBLAS_INCLUDE_DIR})
  target_compile_options(${target} PRIVATE -O2 -ffp-contract=off -include ${emu_dir}/cuda_emu.h
    -Wall -Wextra -Werror)
  target_link_libraries(${target} PRIVATE OpenMP::OpenMP_C)
  if(CTRON_SANITIZE)   # make sanitize: the kernels and the emulation under ASan + UBSan too
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-sanitize-recover=all
      -fno-omit-frame-pointer -g)
  endif()
endfunction()

add_library(ctron_cuda_emu_runtime OBJECT ${emu_runtime_sources})
ctron_emu_cxx(ctron_cuda_emu_runtime)
add_library(ctron_cuda_emu_kernels OBJECT ${emu_kernel_sources})
ctron_emu_cxx(ctron_cuda_emu_kernels)
# The kernels are CUDA C++ that nvcc accepts with -Wall -Wextra -Werror; g++ sees them as host code:
set(CTRON_EMU_KERNEL_FLAGS
  -Wno-unknown-pragmas    # `#pragma unroll` is nvcc's
  -fno-strict-aliasing)   # they pun floats through float4/uint2/bf16x2, as CUDA code may: g++ must not
                          # optimise on the ISO aliasing rules (-Wstrict-aliasing would flag them)
target_compile_options(ctron_cuda_emu_kernels PRIVATE ${CTRON_EMU_KERNEL_FLAGS})

add_library(ctron_core_emu STATIC src/backend/backend.c src/backend/cuda/cuda_backend.c
            src/backend/cuda/cuda_profile.c)
target_compile_definitions(ctron_core_emu PRIVATE CTRON_HAVE_CUDA CT_EMU)
target_include_directories(ctron_core_emu BEFORE PRIVATE ${emu_dir}/include)
target_include_directories(ctron_core_emu PRIVATE ${CTRON_EMU_CUDA_INCLUDE})
target_link_libraries(ctron_core_emu PUBLIC ctron_host ctron_cuda_emu_kernels ctron_cuda_emu_runtime)
set_target_properties(ctron_core_emu PROPERTIES LINKER_LANGUAGE CXX)

add_executable(ctron-emu src/cli/main.c)
target_link_libraries(ctron-emu ctron_core_emu)
set_target_properties(ctron-emu PROPERTIES LINKER_LANGUAGE CXX)
message(STATUS "CUDA emulation: ctron_core_emu, ctron-emu and the cuda-emu tests (headers ${CTRON_EMU_CUDA_INCLUDE})")

# Joins one ISA level's kernel objects into one relocatable object and appends SUFFIX to
# every lp_* symbol they define (definitions and the copies' own calls to them alike), so
# several levels' copies of the same sources link into one binary. Symbols the objects only
# use (lp_err, OpenMP, libc) keep their names.
#   cmake -DLD=ld -DNM=nm -DOBJCOPY=objcopy -DSUFFIX=_avx2 -DOUT=x.o -DOBJS="a.o|b.o" -P isa_suffix.cmake
cmake_minimum_required(VERSION 3.22) # IN_LIST
string(REPLACE "|" ";" objs "${OBJS}")
set(joined ${OUT}.joined.o)
execute_process(COMMAND ${LD} -r -o ${joined} ${objs} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "isa_suffix: ${LD} -r failed for ${OUT}")
endif()
execute_process(COMMAND ${NM} --defined-only --format=posix ${joined} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "isa_suffix: ${NM} failed on ${joined}")
endif()
# Global lp_* symbols of any kind (the copies' entry points and shared helpers), and local
# functions too (static helpers, OpenMP's outlined bodies): those need no renaming to link,
# but with it every instruction of a copy sits in a function named for its level, which the
# disassembly check (scripts/check_isa.sh) and profilers (perf report) read.
string(REPLACE "\n" ";" lines "${syms}")
set(map "")
set(seen "")
foreach(line ${lines})
  set(sym "")
  if(line MATCHES "^(lp_[A-Za-z0-9_.]+) [A-Z] ")
    set(sym "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^([A-Za-z_.][A-Za-z0-9_.$]*) t ")
    set(sym "${CMAKE_MATCH_1}")
  endif()
  if(NOT sym STREQUAL "")
    if(NOT sym IN_LIST seen)
      list(APPEND seen "${sym}")
      string(APPEND map "${sym} ${sym}${SUFFIX}\n")
    endif()
  endif()
endforeach()
file(WRITE ${OUT}.syms "${map}")
execute_process(COMMAND ${OBJCOPY} --redefine-syms=${OUT}.syms ${joined} ${OUT} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "isa_suffix: ${OBJCOPY} failed for ${OUT}")
endif()
file(REMOVE ${joined})

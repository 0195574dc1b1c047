/* Does a setenv in main reach libgomp? It reads OMP_WAIT_POLICY / GOMP_SPINCOUNT in a
 * constructor when the library loads, before main. With OMP_WAIT_POLICY=active the idle
 * worker spins through a serial stretch and the process's CPU time grows with wall time;
 * without it, the worker sleeps after ~3 ms. Build and run:
 *   cc -O2 -fopenmp bench/contention/spin_env_check.c -o /tmp/sec
 *   /tmp/sec none; /tmp/sec setenv; /tmp/sec xreexec; OMP_WAIT_POLICY=active /tmp/sec env
 * "setenv" reads like "none" (too late); "xreexec" (set, then execv /proc/self/exe) reads
 * like "env": that is why lp_threads_bound_spin re-executes loupe. */
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static double now(clockid_t c){struct timespec t;clock_gettime(c,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  if(argc>1 && argv[1][0]=='s') setenv("OMP_WAIT_POLICY","active",1);
  if(argc>1 && argv[1][0]=='x' && !getenv("OMP_WAIT_POLICY")){setenv("OMP_WAIT_POLICY","active",1);execv("/proc/self/exe",argv);}
  omp_set_num_threads(2);
  volatile double s=0;
  #pragma omp parallel
  { s+=1; }
  double w0=now(CLOCK_MONOTONIC),c0=now(CLOCK_PROCESS_CPUTIME_ID);
  usleep(300000); /* serial section: the worker thread waits at the pool */
  double w1=now(CLOCK_MONOTONIC),c1=now(CLOCK_PROCESS_CPUTIME_ID);
  printf("%s: cpu/wall during serial sleep = %.2f\n",argc>1?argv[1]:"none",(c1-c0)/(w1-w0));
}

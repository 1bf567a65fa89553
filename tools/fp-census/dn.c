/* dn.c: what an SSE/AVX multiply, add, divide, FMA and subtraction cost with
 * normal and subnormal operands and results, ns a value (scripts/device-prof.sh
 * runs it on the device; docs/BENCHMARKS.md, s30). cc -O2 -o dn dn.c
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define N 4096
float a[N], b[N], c[N];
__attribute__((target("avx2,fma"))) static double run(int op){
  double t0=now();
  for(int r=0;r<2000;r++){
    for(int i=0;i<N;i+=8){
      __m256 x=_mm256_loadu_ps(a+i), y=_mm256_loadu_ps(b+i), z;
      switch(op){case 0: z=_mm256_mul_ps(x,y);break; case 1: z=_mm256_add_ps(x,y);break; case 2: z=_mm256_div_ps(x,y);break; case 3: z=_mm256_fmadd_ps(x,y,y); break; default: z=_mm256_sub_ps(x,y);}
      _mm256_storeu_ps(c+i,z);
    }
    __asm__ volatile("":::"memory");
  }
  return (now()-t0)/(2000.0*N)*1e9;
}
int main(){
  const char *names[]={"mul","add","div","fma","sub"};
  struct {const char*n; float av, bv;} cs[]={
    {"normal,normal->normal",1.5f,1.25f},
    {"sub in * normal -> sub out",0x1p-140f,0.5f},
    {"sub in * normal -> normal out",0x1p-140f,0x1p30f},
    {"normal*normal -> sub out",0x1p-70f,0x1p-70f},
    {"sub in + normal -> normal",0x1p-140f,1.0f},
    {"sub + sub -> sub",0x1p-140f,0x1p-141f},
    {"normal - normal -> sub",0x1.8p-126f,0x1p-126f},
  };
  for(unsigned k=0;k<sizeof cs/sizeof cs[0];k++){
    printf("%-32s",cs[k].n);
    for(int op=0;op<5;op++){ for(int i=0;i<N;i++){a[i]=cs[k].av;b[i]=cs[k].bv;} if(op==2&&k==3){for(int i=0;i<N;i++){a[i]=0x1p-70f;b[i]=0x1p70f;}} printf(" %s %.2f", names[op], run(op)); }
    printf("\n");
  }
}

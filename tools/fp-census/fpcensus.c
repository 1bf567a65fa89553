/* fpcensus.c: an LD_PRELOAD census of the SSE/AVX instructions that read a
 * subnormal (MXCSR DE) or make a tiny result (UE), by address. Each thread
 * unmasks DE and UE; a SIGFPE counts the instruction, masks them in the
 * saved context and sets the trap flag; the SIGTRAP one instruction later
 * unmasks them again. The results are unchanged (the instruction runs
 * masked, as always). At exit: "DE UE object+offset" lines to $FPCENSUS_OUT
 * (default /tmp/fpcensus.txt); census.py turns them into functions.
 *
 * Build: gcc -O2 -shared -fPIC -o fpcensus.so fpcensus.c -ldl -lpthread
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <xmmintrin.h>

#define SLOTS (1 << 16)
static struct { uintptr_t rip; unsigned long de, ue; } table[SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void
unmask_here (void)
{
  _mm_setcsr ((_mm_getcsr () & ~0x3fu) & ~((1u << 8) | (1u << 11)));
}

static void
on_fpe (int sig, siginfo_t *si, void *ctx)
{
  ucontext_t *uc = ctx;
  uintptr_t rip = uc->uc_mcontext.gregs[REG_RIP];
  unsigned csr = uc->uc_mcontext.fpregs->mxcsr;
  unsigned h = (unsigned) ((rip * 0x9E3779B97F4A7C15ull) >> 48) & (SLOTS - 1);

  (void) sig;
  (void) si;
  /* No floating point inside the lock: nothing here can trap. */
  pthread_mutex_lock (&lock);
  for (int probes = 0; table[h].rip != 0 && table[h].rip != rip && probes < SLOTS; probes++)
    h = (h + 1) & (SLOTS - 1);
  if (table[h].rip == 0 || table[h].rip == rip)
    {
      table[h].rip = rip;
      if (csr & 0x02)
        table[h].de++;
      if (csr & 0x10)
        table[h].ue++;
    }
  pthread_mutex_unlock (&lock);
  uc->uc_mcontext.fpregs->mxcsr = (csr & ~0x3fu) | (1u << 8) | (1u << 11);
  uc->uc_mcontext.gregs[REG_EFL] |= 0x100;
}

static void
on_trap (int sig, siginfo_t *si, void *ctx)
{
  ucontext_t *uc = ctx;

  (void) sig;
  (void) si;
  uc->uc_mcontext.gregs[REG_EFL] &= ~0x100;
  uc->uc_mcontext.fpregs->mxcsr = (uc->uc_mcontext.fpregs->mxcsr & ~0x3fu) & ~((1u << 8) | (1u << 11));
}

static void
dump (void)
{
  const char *path = getenv ("FPCENSUS_OUT");
  FILE *f = fopen (path ? path : "/tmp/fpcensus.txt", "w");

  _mm_setcsr (_mm_getcsr () | 0x1f80);
  for (int i = 0; i < SLOTS; i++)
    if (table[i].rip != 0)
      {
        Dl_info info;
        if (dladdr ((void *) table[i].rip, &info) && info.dli_fname)
          fprintf (f, "%lu %lu %s+0x%lx\n", table[i].de, table[i].ue, info.dli_fname,
                   (unsigned long) (table[i].rip - (uintptr_t) info.dli_fbase));
        else
          fprintf (f, "%lu %lu ?+0x%lx\n", table[i].de, table[i].ue, (unsigned long) table[i].rip);
      }
  fclose (f);
}

/* New threads: wrap pthread_create so that each thread unmasks at its start. */
typedef struct { void *(*fn) (void *); void *arg; } Start;
static void *
start (void *p)
{
  Start s = *(Start *) p;
  free (p);
  unmask_here ();
  return s.fn (s.arg);
}

int
pthread_create (pthread_t *t, const pthread_attr_t *a, void *(*fn) (void *), void *arg)
{
  static int (*real) (pthread_t *, const pthread_attr_t *, void *(*) (void *), void *);
  Start *s = malloc (sizeof *s);

  if (!real)
    real = dlsym (RTLD_NEXT, "pthread_create");
  s->fn = fn;
  s->arg = arg;
  return real (t, a, start, s);
}

__attribute__ ((constructor)) static void
init (void)
{
  struct sigaction sa = { 0 };

  sa.sa_flags = SA_SIGINFO;
  sa.sa_sigaction = on_fpe;
  sigaction (SIGFPE, &sa, NULL);
  sa.sa_sigaction = on_trap;
  sigaction (SIGTRAP, &sa, NULL);
  atexit (dump);
  unmask_here ();
}

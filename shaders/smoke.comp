// SPDX-License-Identifier: GPL-3.0-or-later
//
// The smallest useful kernel: proves that SPIR-V built from shaders/ reaches the
// device through the GResource bundle and that a dispatch computes on it.
// data[i] = data[i] * 3 + bias, integers only, so the result is exact everywhere.
#version 450

layout (local_size_x = 64) in;

layout (push_constant) uniform Push
{
  uint n;
  int bias;
} push;

layout (std430, set = 0, binding = 0) buffer Data
{
  int data[];
};

void
main ()
{
  uint i = gl_GlobalInvocationID.x;
  if (i < push.n)
    data[i] = data[i] * 3 + push.bias;
}

// A kernel that reads every special register of the launch geometry, in all
// three dimensions, for the dims-specialization test. Built as kernels.cu is.
#define __global__ __attribute__((global))

// Each sum weights x, y and z differently, so a dimension taken from another
// folds to a different constant.
__global__ void dims3(unsigned *out) {
  out[0] = __nvvm_read_ptx_sreg_ntid_x() + 100 * __nvvm_read_ptx_sreg_ntid_y() +
           10000 * __nvvm_read_ptx_sreg_ntid_z();
  out[1] = __nvvm_read_ptx_sreg_nctaid_x() +
           100 * __nvvm_read_ptx_sreg_nctaid_y() +
           10000 * __nvvm_read_ptx_sreg_nctaid_z();
  out[2] = __nvvm_read_ptx_sreg_tid_x() + __nvvm_read_ptx_sreg_tid_y() +
           __nvvm_read_ptx_sreg_tid_z();
  out[3] = __nvvm_read_ptx_sreg_ctaid_x() + __nvvm_read_ptx_sreg_ctaid_y() +
           __nvvm_read_ptx_sreg_ctaid_z();
}

/* The launch memo (see struct mneme_launch_memo): its table of remembered
 * launch keys and the host API calls that enable and drain it. Its lookup,
 * on the launch path, is inline in shim_internal.h. */
#include "shim_internal.h"

uint64_t mneme_memo_pending;

void mneme_memo_insert(struct launch_memo *m, uint64_t h,
                       const unsigned char *key, int repeat) {
  if (memo_find(m, h, key) != NULL)
    return;
  if ((m->used + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 16;
    struct memo_slot *slots = calloc(cap, sizeof *slots);
    if (slots == NULL)
      return;
    for (size_t i = 0; i < m->cap; i++) {
      struct memo_slot *s = &m->slots[i];
      if (s->key == NULL)
        continue;
      size_t j = s->hash & (cap - 1);
      while (slots[j].key != NULL)
        j = (j + 1) & (cap - 1);
      slots[j] = *s;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
  }
  unsigned char *copy = malloc(m->key_len);
  if (copy == NULL)
    return;
  memcpy(copy, key, m->key_len);
  size_t j = h & (m->cap - 1);
  while (m->slots[j].key != NULL)
    j = (j + 1) & (m->cap - 1);
  m->slots[j] = (struct memo_slot){.hash = h, .key = copy, .repeat = repeat};
  m->used++;
}

int mneme_api_memo_enable(int idx, int nparams, const size_t *sizes) {
  if (nparams < 0)
    return 0;
  struct launch_memo *m = calloc(1, sizeof *m);
  size_t *copy = calloc((size_t)nparams + 1, sizeof *copy);
  if (m == NULL || copy == NULL) {
    free(m);
    free(copy);
    return 0;
  }
  m->nparams = nparams;
  m->sizes = copy;
  m->key_len = MEMO_KEY_HEADER;
  for (int i = 0; i < nparams; i++) {
    copy[i] = sizes[i];
    m->key_len += sizes[i];
  }
  pthread_mutex_lock(&mneme_table_lock);
  int ok = idx >= 0 && idx < mneme_n_kernels;
  if (ok && mneme_kernels[idx].memo == NULL) {
    mneme_kernels[idx].memo = m;
    m = NULL;
  }
  pthread_mutex_unlock(&mneme_table_lock);
  if (m != NULL) {
    free(m->sizes);
    free(m);
  }
  return ok;
}

int mneme_api_memo_drain(struct mneme_launch_count *out, int cap) {
  int n = 0;
  pthread_mutex_lock(&mneme_table_lock);
  for (int i = 0; mneme_memo_pending > 0 && i < mneme_n_kernels && n < cap;
       i++) {
    struct kernel_entry *k = &mneme_kernels[i];
    if (k->forwarded > 0) {
      out[n++] = (struct mneme_launch_count){i, 0, k->forwarded};
      mneme_memo_pending -= k->forwarded;
      k->forwarded = 0;
    }
    struct launch_memo *m = k->memo;
    for (size_t j = 0; m != NULL && j < m->cap && n < cap; j++) {
      struct memo_slot *s = &m->slots[j];
      if (s->key != NULL && s->launches > 0) {
        out[n++] = (struct mneme_launch_count){i, s->repeat, s->launches};
        mneme_memo_pending -= s->launches;
        s->launches = 0;
      }
    }
  }
  pthread_mutex_unlock(&mneme_table_lock);
  return n;
}

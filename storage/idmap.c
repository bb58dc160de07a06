/* Id maps: the original id strings of a rating file <-> contiguous indices. */
#include "storage/idmap.h"
#include "runtime/internal.h"

#include <string.h>

/* FNV-1a, then a multiply-xorshift finish so the low bits that pick the slot are mixed. */
static uint32_t hash_name(const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)name[i]) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (uint32_t)h;
}

/* p with room for at least `needed` elements, doubling its capacity (NULL as starfa_realloc_array). */
static void *grow_array(void *p, size_t *capacity, size_t needed, size_t elem)
{
	if (needed <= *capacity)
		return p;
	size_t want = *capacity < 16 ? 16 : *capacity;
	while (want < needed)
		want = want > SIZE_MAX / 2 ? needed : want * 2;
	void *grown = starfa_realloc_array(p, want, elem);
	if (grown)
		*capacity = want;
	return grown;
}

starfa_idmap *idmap_new(void)
{
	starfa_idmap *map = starfa_calloc(1, sizeof *map);
	if (!map)
		return NULL;
	map->starts = starfa_malloc(16, sizeof *map->starts);
	map->slots = starfa_calloc(32, sizeof *map->slots);
	if (!map->starts || !map->slots) {
		idmap_free(map);
		return NULL;
	}
	map->starts[0] = 0;
	map->starts_capacity = 16;
	map->slot_mask = 31;
	return map;
}

void idmap_free(starfa_idmap *map)
{
	if (!map)
		return;
	free(map->chars);
	free(map->starts);
	free(map->slots);
	free(map);
}

static const char *name_at(const starfa_idmap *map, int64_t i, size_t *len)
{
	*len = (size_t)(map->starts[i + 1] - map->starts[i] - 1);
	return map->chars + map->starts[i];
}

/* The slot holding the name, or the empty slot where it belongs. */
static uint64_t *find_slot(const starfa_idmap *map, const char *name, size_t len, uint32_t hash)
{
	uint64_t pos = hash & map->slot_mask;
	for (;; pos = (pos + 1) & map->slot_mask) {
		uint64_t slot = map->slots[pos];
		if (slot == 0)
			return &map->slots[pos];
		if ((uint32_t)(slot >> 32) != hash)
			continue;
		size_t known_len;
		const char *known = name_at(map, (int64_t)(slot & 0xffffffffu) - 1, &known_len);
		if (known_len == len && memcmp(known, name, len) == 0)
			return &map->slots[pos];
	}
}

static int grow_slots(starfa_idmap *map)
{
	uint64_t size = (map->slot_mask + 1) * 2;
	uint64_t *slots = starfa_calloc(size, sizeof *slots);
	if (!slots)
		return STARFA_ENOMEM;
	for (uint64_t i = 0; i <= map->slot_mask; i++) {
		uint64_t slot = map->slots[i];
		if (slot == 0)
			continue;
		uint64_t pos = (slot >> 32) & (size - 1);
		while (slots[pos])
			pos = (pos + 1) & (size - 1);
		slots[pos] = slot;
	}
	free(map->slots);
	map->slots = slots;
	map->slot_mask = size - 1;
	return 0;
}

static int append_name(starfa_idmap *map, const char *name, size_t len)
{
	size_t used = (size_t)map->starts[map->count];
	char *chars = grow_array(map->chars, &map->chars_capacity, used + len + 1, 1);
	if (!chars)
		return STARFA_ENOMEM;
	map->chars = chars;
	int64_t *starts =
		grow_array(map->starts, &map->starts_capacity, (size_t)map->count + 2, sizeof *starts);
	if (!starts)
		return STARFA_ENOMEM;
	map->starts = starts;
	memcpy(map->chars + used, name, len);
	map->chars[used + len] = '\0';
	map->starts[map->count + 1] = (int64_t)(used + len + 1);
	return 0;
}

int idmap_intern(starfa_idmap *map, const char *name, size_t len, int64_t *index)
{
	uint32_t hash = hash_name(name, len);
	uint64_t *slot = find_slot(map, name, len, hash);
	if (*slot) {
		*index = (int64_t)(*slot & 0xffffffffu) - 1;
		return 0;
	}
	/* Indices must fit the slot's 32 bits; the readers stop far earlier (int32 dimensions). */
	if (map->count >= UINT32_MAX - 1)
		return starfa_set_error(STARFA_ENOMEM, "too many distinct ids");
	int rc = append_name(map, name, len);
	if (rc)
		return rc;
	*slot = (uint64_t)hash << 32 | (uint64_t)(map->count + 1);
	*index = map->count++;
	if ((uint64_t)map->count * 2 > map->slot_mask)
		return grow_slots(map);
	return 0;
}

static void *duplicate(const void *p, size_t count, size_t size)
{
	void *copy = starfa_malloc(count, size);
	if (copy && count)
		memcpy(copy, p, count * size);
	return copy;
}

int idmap_copy(const starfa_idmap *map, starfa_idmap **out)
{
	*out = NULL;
	if (!map)
		return 0;
	starfa_idmap *copy = starfa_calloc(1, sizeof *copy);
	if (!copy)
		return STARFA_ENOMEM;
	*copy = *map;
	copy->chars = duplicate(map->chars, (size_t)map->starts[map->count], 1);
	copy->starts = duplicate(map->starts, (size_t)map->count + 1, sizeof *map->starts);
	copy->slots = duplicate(map->slots, map->slot_mask + 1, sizeof *map->slots);
	if (!copy->chars || !copy->starts || !copy->slots) {
		idmap_free(copy);
		return STARFA_ENOMEM;
	}
	copy->chars_capacity = (size_t)map->starts[map->count];
	copy->starts_capacity = (size_t)map->count + 1;
	*out = copy;
	return 0;
}

int64_t starfa_idmap_count(const starfa_idmap *map)
{
	return map ? map->count : 0;
}

const char *starfa_idmap_name(const starfa_idmap *map, int64_t i)
{
	if (!map || i < 0 || i >= map->count)
		return NULL;
	return map->chars + map->starts[i];
}

int64_t starfa_idmap_find(const starfa_idmap *map, const char *name)
{
	if (!map || !name)
		return -1;
	size_t len = strlen(name);
	uint64_t slot = *find_slot(map, name, len, hash_name(name, len));
	return slot ? (int64_t)(slot & 0xffffffffu) - 1 : -1;
}


# Every subset: exact, but 2^N is too slow beyond subtask 1.
n, capacity = map(int, input().split())
items = [tuple(map(int, input().split())) for _ in range(n)]
best_value, best_mask = 0, 0
for mask in range(1 << n):
    weight = sum(items[i][0] for i in range(n) if mask >> i & 1)
    if weight <= capacity:
        value = sum(items[i][1] for i in range(n) if mask >> i & 1)
        if value > best_value:
            best_value, best_mask = value, mask
picked = [i + 1 for i in range(n) if best_mask >> i & 1]
print(len(picked))
print(*picked)

# Partial score: take items by value per weight while they fit.
n, capacity = map(int, input().split())
items = [tuple(map(int, input().split())) for _ in range(n)]
order = sorted(range(n), key=lambda i: items[i][1] / items[i][0], reverse=True)
picked, load = [], 0
for i in order:
    if load + items[i][0] <= capacity:
        picked.append(i + 1)
        load += items[i][0]
print(len(picked))
print(*picked)

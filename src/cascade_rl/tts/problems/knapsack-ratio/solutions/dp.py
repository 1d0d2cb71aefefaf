# Full score: 0/1 knapsack by dynamic programming over the capacity, then walk back the choice.
n, capacity = map(int, input().split())
items = [tuple(map(int, input().split())) for _ in range(n)]
best = [[0] * (capacity + 1)]
for weight, value in items:
    previous = best[-1]
    row = previous[:]
    for c in range(weight, capacity + 1):
        if previous[c - weight] + value > row[c]:
            row[c] = previous[c - weight] + value
    best.append(row)
picked, c = [], capacity
for i in range(n, 0, -1):
    if best[i][c] != best[i - 1][c]:
        picked.append(i)
        c -= items[i - 1][0]
print(len(picked))
print(*sorted(picked))

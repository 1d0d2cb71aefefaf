# Subtask 1 only: Kadane's scan over the single row (reads only the first row).
n, m = map(int, input().split())
row = list(map(int, input().split()))
best, current = row[0], 0
for value in row:
    current = max(value, current + value)
    best = max(best, current)
print(best)

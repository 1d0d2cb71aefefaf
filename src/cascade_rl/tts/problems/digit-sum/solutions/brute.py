# Subtask 1 only: add up the digits of every number (too slow for N up to 10^18).
n = int(input())
print(sum(sum(map(int, str(x))) for x in range(1, n + 1)))

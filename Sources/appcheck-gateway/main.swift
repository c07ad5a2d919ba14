import Gateway
print("appcheck-gateway")

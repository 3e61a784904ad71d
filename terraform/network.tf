# A VPC with one public and one private subnet per availability zone, or, by
# variable, an existing VPC and its subnets. Everything but the load balancer
# and the load driver lives in the private subnets and leaves through NAT.

data "aws_availability_zones" "available" {
  state = "available"

  filter {
    name   = "opt-in-status"
    values = ["opt-in-not-required"]
  }
}

# m5zn (the paper's front-end type) is not offered in every zone; a subnet in
# such a zone would leave the autoscaling group unable to launch there.
data "aws_ec2_instance_type_offerings" "by_type" {
  for_each = local.create_vpc ? toset(local.instance_types) : toset([])

  location_type = "availability-zone"

  filter {
    name   = "instance-type"
    values = [each.key]
  }
}

locals {
  usable_azs = sort(tolist(setintersection(
    toset(data.aws_availability_zones.available.names),
    [for o in data.aws_ec2_instance_type_offerings.by_type : toset(o.locations)]...
  )))
  azs       = slice(local.usable_azs, 0, min(var.az_count, length(local.usable_azs)))
  nat_count = var.nat_gateway_per_az ? length(local.azs) : 1

  vpc_id             = local.create_vpc ? aws_vpc.this[0].id : var.existing_vpc_id
  public_subnet_ids  = local.create_vpc ? aws_subnet.public[*].id : var.existing_public_subnet_ids
  private_subnet_ids = local.create_vpc ? aws_subnet.private[*].id : var.existing_private_subnet_ids
}

resource "aws_vpc" "this" {
  count = local.create_vpc ? 1 : 0

  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true

  tags = { Name = var.name }

  lifecycle {
    precondition {
      condition     = length(local.azs) >= var.az_count
      error_message = "Fewer than az_count availability zones in this region offer all of the chosen instance types; lower az_count or pick other types."
    }
  }
}

# With no rules, the VPC's default security group denies everything, so an
# instance launched without an explicit group is isolated.
resource "aws_default_security_group" "this" {
  count = local.create_vpc ? 1 : 0

  vpc_id = aws_vpc.this[0].id
  tags   = { Name = "${var.name}-default-deny" }
}

resource "aws_internet_gateway" "this" {
  count = local.create_vpc ? 1 : 0

  vpc_id = aws_vpc.this[0].id
  tags   = { Name = var.name }
}

# /20s out of a /16: public subnets take the first az_count blocks, private
# ones start at block 8, which leaves room to grow to six zones.
resource "aws_subnet" "public" {
  count = local.create_vpc ? length(local.azs) : 0

  vpc_id            = aws_vpc.this[0].id
  availability_zone = local.azs[count.index]
  cidr_block        = cidrsubnet(var.vpc_cidr, 4, count.index)

  tags = { Name = "${var.name}-public-${local.azs[count.index]}", Tier = "public" }
}

resource "aws_subnet" "private" {
  count = local.create_vpc ? length(local.azs) : 0

  vpc_id            = aws_vpc.this[0].id
  availability_zone = local.azs[count.index]
  cidr_block        = cidrsubnet(var.vpc_cidr, 4, count.index + 8)

  tags = { Name = "${var.name}-private-${local.azs[count.index]}", Tier = "private" }
}

resource "aws_route_table" "public" {
  count = local.create_vpc ? 1 : 0

  vpc_id = aws_vpc.this[0].id
  tags   = { Name = "${var.name}-public" }
}

resource "aws_route" "public_internet" {
  count = local.create_vpc ? 1 : 0

  route_table_id         = aws_route_table.public[0].id
  destination_cidr_block = "0.0.0.0/0"
  gateway_id             = aws_internet_gateway.this[0].id
}

resource "aws_route_table_association" "public" {
  count = local.create_vpc ? length(local.azs) : 0

  subnet_id      = aws_subnet.public[count.index].id
  route_table_id = aws_route_table.public[0].id
}

resource "aws_eip" "nat" {
  count = local.create_vpc ? local.nat_count : 0

  domain = "vpc"
  tags   = { Name = "${var.name}-nat-${count.index}" }

  depends_on = [aws_internet_gateway.this]
}

resource "aws_nat_gateway" "this" {
  count = local.create_vpc ? local.nat_count : 0

  allocation_id = aws_eip.nat[count.index].id
  subnet_id     = aws_subnet.public[count.index].id
  tags          = { Name = "${var.name}-nat-${count.index}" }

  depends_on = [aws_internet_gateway.this]
}

# One private route table per zone, so switching nat_gateway_per_az on only
# changes routes, never subnet associations.
resource "aws_route_table" "private" {
  count = local.create_vpc ? length(local.azs) : 0

  vpc_id = aws_vpc.this[0].id
  tags   = { Name = "${var.name}-private-${local.azs[count.index]}" }
}

resource "aws_route" "private_nat" {
  count = local.create_vpc ? length(local.azs) : 0

  route_table_id         = aws_route_table.private[count.index].id
  destination_cidr_block = "0.0.0.0/0"
  nat_gateway_id         = aws_nat_gateway.this[var.nat_gateway_per_az ? count.index : 0].id
}

resource "aws_route_table_association" "private" {
  count = local.create_vpc ? length(local.azs) : 0

  subnet_id      = aws_subnet.private[count.index].id
  route_table_id = aws_route_table.private[count.index].id
}
